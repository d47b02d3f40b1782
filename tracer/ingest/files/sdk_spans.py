"""The OpenTelemetry SDK's own span JSON, decoded at the edge into the one span shape (``PlainSpan``).

What a developer writes to a file first: ``ConsoleSpanExporter(out=file)`` prints ``ReadableSpan.to_json()``
for each span (a pretty-printed object per span, one after the other), and people also save those
objects as a list, as JSON lines, or under ``{"spans": [...]}``. One object per span: ``name``,
``context: {trace_id, span_id}`` (hex with ``0x``, bare hex, or integers), ``parent_id`` (the Python SDK;
others write ``parent`` as an id or a context object), ``kind`` (``SpanKind.CLIENT``), ``start_time`` and
``end_time`` (ISO), ``status: {status_code, description}``, ``attributes``, ``events``, ``resource:
{attributes}``, and sometimes ``instrumentation_scope``. From here the spans are mapped exactly as an OTLP
file's (``otlp_json.OtlpFile``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...records.spans import PlainSpan
from .detect import read_text
from .errors import TrajectoryFormatError
from .span_exports import flatten

__all__ = ["FORMAT", "sniff", "sniff_text", "parse_text", "parse", "spans_of_objects"]

FORMAT = "otel-sdk-json"
_HEX = re.compile(r"^(0x)?[0-9a-fA-F]+$")
_HEAD = re.compile(r'^\s*[\[{]\s*(?:"spans"\s*:\s*\[\s*\{)?')


def _objects(text: str) -> Iterator[Any]:
    """Every top-level JSON value of ``text``: one document, JSON lines, or objects one after another."""
    decoder = json.JSONDecoder()
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n\ufeff":
            i += 1
        if i >= n:
            return
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise TrajectoryFormatError(f"invalid JSON: {exc.msg.removesuffix(' at')} at line {exc.lineno} "
                                        f"column {exc.colno}") from exc
        yield value


def _is_span(obj: Any) -> bool:
    return isinstance(obj, Mapping) and isinstance(obj.get("context"), Mapping) \
        and "span_id" in obj["context"] and "name" in obj


def _spans_in(value: Any) -> list[Any] | None:
    if _is_span(value):
        return [value]
    if isinstance(value, Mapping) and isinstance(value.get("spans"), list):
        value = value["spans"]
    if isinstance(value, list) and value and _is_span(value[0]):
        return value
    return None


def sniff(path: Path) -> bool:
    """Cheaply, from the file's head: an SDK span object comes first (checked whole by ``parse``)."""
    import gzip
    import zlib
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as f:  # type: ignore[operator]
            head = f.read(1 << 16).decode("utf-8", "replace").lstrip("\ufeff")
    except (OSError, EOFError, zlib.error):
        return False
    return bool(_HEAD.match(head[:64])) and all(k in head for k in ('"context"', '"span_id"', '"name"'))


def sniff_text(text: str) -> bool:
    """The text starts with an SDK span object (alone, in a list, or under ``spans``)."""
    if not _HEAD.match(text[:64]):
        return False
    try:
        first = next(_objects(text[: 1 << 20]), None)
    except TrajectoryFormatError:
        # A pretty-printed object bigger than the head we read: look at the whole first value.
        try:
            first = next(_objects(text), None)
        except TrajectoryFormatError:
            return False
    return _spans_in(first) is not None


def _id(value: Any, size: int) -> str | None:
    """An id as OTLP's lower-case hex of ``size`` digits: ``0x``-hex, bare hex, or an integer."""
    if value is None or value == "" or value == 0:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:0{size}x}"
    text = str(value).strip()
    if _HEX.match(text):
        return text.lower().removeprefix("0x").rjust(size, "0")
    return None


def _ns(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)  # the SDK's own nanoseconds
    if not isinstance(value, str) or not value:
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=timezone.utc)
    return int(stamp.timestamp()) * 1_000_000_000 + stamp.microsecond * 1000


def _iso(value: Any) -> str | None:
    ns = _ns(value)
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def _parent(obj: Mapping[str, Any]) -> str | None:
    parent = obj.get("parent_id", obj.get("parent"))
    if isinstance(parent, Mapping):
        parent = parent.get("span_id")
    return _id(parent, 16)


def _kind(value: Any) -> str:
    text = str(value or "").upper().rsplit(".", 1)[-1].removeprefix("SPAN_KIND_")
    return text if text in ("INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER") else "INTERNAL"


def _attributes(value: Any) -> dict[str, Any]:
    """Attributes as OTLP carries them: plain values and lists of them as they are (a JSON string stays
    text for the conventions to read), nested objects as dotted keys."""
    return flatten(value) if isinstance(value, Mapping) else {}


def _span(obj: Mapping[str, Any]) -> PlainSpan:
    context = obj["context"]
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    code = str(status.get("status_code") or "UNSET").upper().rsplit(".", 1)[-1]
    resource = obj.get("resource") if isinstance(obj.get("resource"), Mapping) else {}
    scope = obj.get("instrumentation_scope") or obj.get("instrumentation_info")
    return PlainSpan(
        trace_id=_id(context.get("trace_id"), 32) or "", span_id=_id(context.get("span_id"), 16) or "",
        parent_span_id=_parent(obj), name=str(obj.get("name") or ""), kind=_kind(obj.get("kind")),
        start_ns=_ns(obj.get("start_time")), end_ns=_ns(obj.get("end_time")),
        status_code=code if code in ("OK", "ERROR") else "UNSET",
        status_message=status.get("description") or None,
        attributes=_attributes(obj.get("attributes")),
        events=[{"name": str(e.get("name") or ""), "time": _iso(e.get("timestamp")),
                 "attributes": _attributes(e.get("attributes"))}
                for e in obj.get("events") or [] if isinstance(e, Mapping)],
        resource=_attributes(resource.get("attributes", resource)),
        scope=(scope.get("name") if isinstance(scope, Mapping) else scope) or None,
    )


def spans_of_objects(values: Iterator[Any]) -> list[PlainSpan]:
    out: list[PlainSpan] = []
    for n, value in enumerate(values, 1):
        spans = _spans_in(value)
        if spans is None:
            raise TrajectoryFormatError(f"value {n} is not an OpenTelemetry SDK span (name, context.span_id)")
        out.extend(_span(s) for s in spans if _is_span(s))
    return out


def parse_text(text: str) -> list[PlainSpan]:
    return spans_of_objects(_objects(text))


def parse(path: Path) -> list[PlainSpan]:
    """Every span of an SDK span-JSON file; ``TrajectoryFormatError`` names what is wrong."""
    return parse_text(read_text(path))
