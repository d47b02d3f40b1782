"""Spans exported by other backends, decoded at the edge into the one span shape OTLP uses.

A span is a span whatever container carried it (STYLE.md, "one mapping, many containers"). Each
decoder here turns one container into ``PlainSpan`` values, the shape ``ingest/otlp/protocol.py``
decodes an OTLP request into, and nothing more: the mapping from spans to runs, steps and tool calls
is ``otlp.conventions.rows_for_trace``, the same function ``looptrace collect`` and OTLP JSON files
use (``otlp_json.OtlpFile``). The containers:

- **span trees**: ``{trace_id, spans: [{span_id, parent_span_id, span_name, span_attributes,
  child_spans: [...]}]}``, the nested shape trace-annotation datasets and several backends export;
- **Phoenix span dataframes**: rows with ``context.span_id``, ``context.trace_id``, ``parent_id``,
  ``name``, ``span_kind``, ``status_code``, ``start_time``/``end_time`` and ``attributes.*`` columns,
  saved as JSON records, JSON lines or Parquet;
- **Jaeger JSON** (the query API's and UI's download): ``data[].spans[]`` with ``references``, typed
  ``tags`` and ``processes``;
- **Zipkin v2 JSON**: a list of spans (or of traces) with ``traceId``, ``id``, ``parentId``,
  ``timestamp`` and ``duration`` in microseconds and string ``tags``.

Attribute values that arrive nested (a Phoenix column holding a list of message objects) are
flattened to the dotted keys OTLP carries (``llm.input_messages.0.message.role``), so the
conventions read them as they read OTLP. Ids are lower-case hex as OTLP's; a missing end time stays
unknown, never the import time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ...records.spans import PlainSpan
from .errors import TrajectoryFormatError

__all__ = ["FORMATS", "sniff_document", "decode_document", "read_parquet"]

FORMATS = ("span-tree", "phoenix-spans", "jaeger-json", "zipkin-json")
_KINDS = {"internal": "INTERNAL", "server": "SERVER", "client": "CLIENT", "producer": "PRODUCER",
          "consumer": "CONSUMER"}
_DURATION = re.compile(r"^P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:([\d.]+)S)?$")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


# -- detection ---------------------------------------------------------------------------------------


def _first(data: Any) -> Any:
    return data[0] if isinstance(data, list) and data else None


def sniff_document(data: Any) -> str | None:
    """Which span container a parsed JSON document is, or None."""
    if isinstance(data, dict) and isinstance(data.get("spans"), list) and (
            not data["spans"] or isinstance(_first(data["spans"]), dict) and "span_id" in data["spans"][0]):
        return "span-tree"
    if isinstance(data, list) and isinstance(_first(data), dict) and "spans" in data[0] and "span_id" in str(
            _first(data[0].get("spans")) or ""):
        return "span-tree"
    if isinstance(data, dict) and isinstance(data.get("data"), list) and isinstance(_first(data["data"]), dict) \
            and "spans" in data["data"][0] and "traceID" in data["data"][0]:
        return "jaeger-json"
    first = _first(data)
    if isinstance(first, list):  # Zipkin: a list of traces, each a list of spans
        first = _first(first)
    if isinstance(first, dict) and "traceId" in first and "id" in first:
        return "zipkin-json"
    if isinstance(first, dict) and "context.span_id" in first:
        return "phoenix-spans"
    return None


def decode_document(data: Any) -> list[PlainSpan]:
    """Every span in a parsed document of one of ``FORMATS``; ``TrajectoryFormatError`` if it is none."""
    kind = sniff_document(data)
    if kind == "span-tree":
        trees = data if isinstance(data, list) else [data]
        return [s for t in trees for s in _tree(t)]
    if kind == "jaeger-json":
        return [s for t in data["data"] for s in _jaeger(t)]
    if kind == "zipkin-json":
        flat = [s for item in data for s in (item if isinstance(item, list) else [item])]
        return [_zipkin(s) for s in flat if isinstance(s, dict)]
    if kind == "phoenix-spans":
        return [_phoenix(r) for r in data if isinstance(r, dict)]
    raise TrajectoryFormatError("unknown format")


def read_parquet(path: Path) -> list[PlainSpan]:
    """A Phoenix span dataframe saved as Parquet (``df.to_parquet``)."""
    import pyarrow.parquet as pq

    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise TrajectoryFormatError(f"not a readable Parquet file ({exc})") from exc
    if not rows or "context.span_id" not in rows[0]:
        raise TrajectoryFormatError("unknown format (a Parquet file without Phoenix's context.span_id column)")
    return [_phoenix({k: _list_text(v) for k, v in r.items()}) for r in rows]


def _list_text(value: Any) -> Any:
    """Parquet writers without nested types keep a column of message objects as JSON text."""
    if isinstance(value, str) and value.startswith("[{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


# -- values ------------------------------------------------------------------------------------------


def flatten(attributes: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested objects and lists of objects as OTLP's dotted keys; lists of plain values stay lists."""
    out: dict[str, Any] = {}
    for key, value in attributes.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                if isinstance(item, Mapping):
                    out.update(flatten(item, f"{name}.{i}."))
                elif item is not None:
                    out[f"{name}.{i}"] = item
        elif value is not None and not (isinstance(value, float) and value != value):  # NaN: a missing cell
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def _hex(value: Any, size: int) -> str | None:
    """An id as OTLP's lower-case hex, left-padded (Zipkin and Jaeger allow 64-bit trace ids)."""
    if value is None or value == "":
        return None
    text = str(value).strip().lower().removeprefix("0x")
    if re.fullmatch(r"[0-9a-f]+", text) and len(text) <= size:
        return text.rjust(size, "0")
    return text  # not hex: kept as the source wrote it, still unique within its trace


def _ns(value: Any) -> int | None:
    """Nanoseconds since the epoch from an ISO time, a datetime or epoch milliseconds (pandas' JSON)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(stamp.timestamp() * 1e6) * 1000
    if isinstance(value, (int, float)):
        return int(value * 1_000_000) if value < 1e14 else int(value)  # ms (pandas) or already ns
    try:
        return _ns(datetime.fromisoformat(str(value).replace("Z", "+00:00")))
    except ValueError:
        return None


def _duration_ns(value: Any) -> int | None:
    """An ISO 8601 duration (``PT1M5.3S``), or a number of seconds."""
    if isinstance(value, (int, float)):
        return int(value * 1e9)
    found = _DURATION.match(str(value or ""))
    if not found or not any(found.groups()):
        return None
    d, h, m, s = (float(g) if g else 0.0 for g in found.groups())
    return int(timedelta(days=d, hours=h, minutes=m, seconds=s).total_seconds() * 1e9)


def _status(code: Any) -> str:
    text = str(code or "").upper().removeprefix("STATUS_CODE_")
    return text if text in ("OK", "ERROR") else "UNSET"


def _kind(value: Any) -> str:
    return _KINDS.get(str(value or "").lower().removeprefix("span_kind_"), "INTERNAL")


def _events(items: Any, time_key: str, name_key: str, attributes_key: str) -> list[dict[str, Any]]:
    out = []
    for e in items if isinstance(items, list) else ():
        if isinstance(e, dict):
            t = _ns(e.get(time_key))
            out.append({"name": str(e.get(name_key) or ""), "attributes": flatten(e.get(attributes_key) or {}),
                        "time": datetime.fromtimestamp(t / 1e9, tz=timezone.utc).replace(tzinfo=None)
                        .isoformat(sep=" ") if t else None})
    return out


# -- containers --------------------------------------------------------------------------------------


def _walk(spans: Iterable[Any], parent: str | None) -> Iterator[tuple[dict[str, Any], str | None]]:
    stack = [(s, parent) for s in reversed(list(spans)) if isinstance(s, dict)]
    while stack:
        span, up = stack.pop()
        yield span, up
        own = _hex(span.get("span_id"), 16)
        stack.extend((c, own) for c in reversed(span.get("child_spans") or []) if isinstance(c, dict))


def _tree(doc: dict[str, Any]) -> list[PlainSpan]:
    out = []
    for s, up in _walk(doc.get("spans") or [], None):
        start = _ns(s.get("timestamp") or s.get("start_time"))
        length = _duration_ns(s.get("duration"))
        out.append(PlainSpan(
            trace_id=_hex(s.get("trace_id") or doc.get("trace_id"), 32) or "",
            span_id=_hex(s.get("span_id"), 16) or "", parent_span_id=_hex(s.get("parent_span_id"), 16) or up,
            name=str(s.get("span_name") or s.get("name") or ""), kind=_kind(s.get("span_kind")),
            start_ns=start, end_ns=_ns(s.get("end_time")) or (start + length if start and length is not None else None),
            status_code=_status(s.get("status_code")), status_message=s.get("status_message") or None,
            attributes=flatten(s.get("span_attributes") or s.get("attributes") or {}),
            events=_tree_events(s.get("events")),
            resource=flatten(s.get("resource_attributes") or {}), scope=s.get("scope_name") or None,
        ))
    return out


def _tree_events(items: Any) -> list[dict[str, Any]]:
    """A span tree's events, keyed ``Name``/``Timestamp``/``Attributes`` (ClickHouse-style exports) or in
    lower case: each event read by the keys it has (an exception event's type and message matter)."""
    out = []
    for e in items if isinstance(items, list) else ():
        upper = isinstance(e, dict) and "Name" in e
        out += _events([e], *(("Timestamp", "Name", "Attributes") if upper else ("timestamp", "name", "attributes")))
    return out


def _phoenix(row: Mapping[str, Any]) -> PlainSpan:
    nested: dict[str, Any] = {}
    for key, value in row.items():
        if key.startswith("attributes."):
            nested[key[len("attributes."):]] = value
        elif key == "attributes" and isinstance(value, Mapping):
            nested.update(value)
    attributes = flatten(nested)
    if row.get("span_kind") and "openinference.span.kind" not in attributes:
        attributes["openinference.span.kind"] = row["span_kind"]
    return PlainSpan(
        trace_id=_hex(row.get("context.trace_id"), 32) or "", span_id=_hex(row.get("context.span_id"), 16) or "",
        parent_span_id=_hex(row.get("parent_id"), 16), name=str(row.get("name") or ""),
        start_ns=_ns(row.get("start_time")), end_ns=_ns(row.get("end_time")),
        status_code=_status(row.get("status_code")), status_message=row.get("status_message") or None,
        attributes=attributes, events=_events(row.get("events"), "timestamp", "name", "attributes"),
    )


def _jaeger_value(tag: Mapping[str, Any]) -> Any:
    value, kind = tag.get("value"), str(tag.get("type") or "").lower()
    if kind in ("int64", "float64", "bool"):
        return value
    if isinstance(value, str) and value.startswith("[") and kind == "string":
        try:  # OTel's Jaeger translation writes array attributes as JSON text
            decoded = json.loads(value)
            return decoded if isinstance(decoded, list) else value
        except ValueError:
            return value
    return value


def _jaeger(trace: Mapping[str, Any]) -> list[PlainSpan]:
    processes = trace.get("processes") or {}
    out = []
    for s in trace.get("spans") or []:
        tags = {t["key"]: _jaeger_value(t) for t in s.get("tags") or [] if isinstance(t, dict) and "key" in t}
        parent = next((r.get("spanID") for r in s.get("references") or []
                       if isinstance(r, dict) and r.get("refType", "CHILD_OF") == "CHILD_OF"), None)
        process = processes.get(s.get("processID")) or s.get("process") or {}
        resource = {t["key"]: _jaeger_value(t) for t in process.get("tags") or [] if isinstance(t, dict)}
        if process.get("serviceName"):
            resource["service.name"] = process["serviceName"]
        start = s.get("startTime")
        out.append(PlainSpan(
            trace_id=_hex(s.get("traceID") or trace.get("traceID"), 32) or "", span_id=_hex(s.get("spanID"), 16) or "",
            parent_span_id=_hex(parent, 16), name=str(s.get("operationName") or ""),
            kind=_kind(tags.pop("span.kind", None)),
            start_ns=int(start) * 1000 if isinstance(start, (int, float)) else None,
            end_ns=int(start + s["duration"]) * 1000 if isinstance(start, (int, float))
            and isinstance(s.get("duration"), (int, float)) else None,
            status_code=_status(tags.pop("otel.status_code", "ERROR" if tags.get("error") is True else None)),
            status_message=tags.pop("otel.status_description", None),
            attributes=tags, resource=resource, scope=tags.pop("otel.scope.name", tags.pop("otel.library.name", None)),
            events=[{"name": str(f.get("event", "")), "attributes": f,
                     "time": datetime.fromtimestamp(log["timestamp"] / 1e6, tz=timezone.utc).replace(tzinfo=None)
                     .isoformat(sep=" ") if isinstance(log.get("timestamp"), (int, float)) else None}
                    for log in s.get("logs") or [] if isinstance(log, dict)
                    for f in [{x["key"]: x.get("value") for x in log.get("fields") or [] if isinstance(x, dict)}]],
        ))
    return out


def _zipkin_value(value: Any) -> Any:
    """Zipkin tags are strings: numbers, booleans and OTel's JSON arrays are read back."""
    if not isinstance(value, str):
        return value
    if _NUMBER.match(value):
        return float(value) if "." in value else int(value)
    if value in ("true", "false"):
        return value == "true"
    if value.startswith("[") and value.endswith("]"):
        try:
            decoded = json.loads(value)
            return decoded if isinstance(decoded, list) else value
        except ValueError:
            return value
    return value


def _zipkin(s: Mapping[str, Any]) -> PlainSpan:
    tags = {k: _zipkin_value(v) for k, v in (s.get("tags") or {}).items()}
    start, length = s.get("timestamp"), s.get("duration")
    endpoint = s.get("localEndpoint") or {}
    return PlainSpan(
        trace_id=_hex(s.get("traceId"), 32) or "", span_id=_hex(s.get("id"), 16) or "",
        parent_span_id=_hex(s.get("parentId"), 16), name=str(s.get("name") or ""), kind=_kind(s.get("kind")),
        start_ns=int(start) * 1000 if isinstance(start, (int, float)) else None,
        end_ns=int(start + length) * 1000 if isinstance(start, (int, float)) and isinstance(length, (int, float))
        else None,
        status_code=_status(tags.pop("otel.status_code", "ERROR" if "error" in tags else None)),
        status_message=tags.pop("otel.status_description", None) or (str(tags["error"]) if "error" in tags else None),
        attributes=tags, scope=tags.pop("otel.scope.name", tags.pop("otel.library.name", None)),
        resource={"service.name": endpoint["serviceName"]} if endpoint.get("serviceName") else {},
        events=[{"name": str(a.get("value") or ""), "attributes": {},
                 "time": datetime.fromtimestamp(a["timestamp"] / 1e6, tz=timezone.utc).replace(tzinfo=None)
                 .isoformat(sep=" ") if isinstance(a.get("timestamp"), (int, float)) else None}
                for a in s.get("annotations") or [] if isinstance(a, dict)],
    )
