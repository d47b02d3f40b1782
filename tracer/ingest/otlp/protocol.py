"""OTLP trace requests decoded into ``PlainSpan`` values: pure functions, no I/O.

Both encodings OTLP/HTTP allows are parsed into the same message, ``ExportTraceServiceRequest``, by the
official bindings, so protobuf and JSON bodies cannot decode differently. OTLP/JSON departs from
protobuf's canonical JSON mapping in one place: trace and span ids are hex strings where the mapping
expects base64 for ``bytes`` fields. ``_ids_to_base64`` rewrites exactly those fields before parsing;
the rest (lowerCamelCase names, int64s as strings, enums as integers, unknown fields) the mapping
already accepts. Attribute values are flattened to plain Python (arrays as lists, kvlists as dicts,
bytes as hex) so nothing past this module sees protobuf types.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from datetime import datetime, timezone
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from ...records.spans import PlainSpan

__all__ = [
    "PROTOBUF", "JSON", "IngestError", "MalformedRequest", "UnsupportedMedia", "RequestTooLarge",
    "media_type", "decompress", "parse_protobuf", "parse_json", "spans_of", "decode", "response_body",
]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_MEDIA = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
_KINDS = {0: "INTERNAL", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR"}
_ID_BYTES = {"traceId": 16, "trace_id": 16, "spanId": 8, "span_id": 8, "parentSpanId": 8, "parent_span_id": 8}
# google.rpc.Code for the Status body of an error response (the OTLP spec lets servers omit it).
_RPC_CODES = {400: 3, 404: 5, 405: 12, 413: 8, 415: 3, 500: 13, 503: 14}


class IngestError(Exception):
    """A request the receiver refuses. ``status`` is the HTTP status; the message is sent to the client."""

    status = 400


class MalformedRequest(IngestError):
    status = 400


class UnsupportedMedia(IngestError):
    status = 415


class RequestTooLarge(IngestError):
    status = 413


def media_type(content_type: str | None) -> str:
    """``PROTOBUF`` or ``JSON`` for a Content-Type header, else ``UnsupportedMedia``."""
    base = (content_type or "").split(";", 1)[0].strip().lower()
    if base not in _MEDIA:
        raise UnsupportedMedia(
            f"unsupported Content-Type {content_type!r}: send {PROTOBUF} or {JSON} (OTLP/HTTP)"
        )
    return _MEDIA[base]


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body without its Content-Encoding (none, gzip or deflate), refusing more than ``limit`` bytes."""
    name = (encoding or "identity").strip().lower()
    if name in ("", "identity"):
        return body
    if name not in ("gzip", "deflate"):
        raise UnsupportedMedia(f"unsupported Content-Encoding {encoding!r}: send gzip, deflate or none")
    out = bytearray()
    data = body
    # gzip may hold several members; deflate is zlib-wrapped in HTTP, but raw deflate is common too.
    wbits = zlib.MAX_WBITS | 16 if name == "gzip" else zlib.MAX_WBITS
    try:
        while data:
            d = zlib.decompressobj(wbits)
            out += d.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                raise RequestTooLarge(f"body is over the {limit}-byte limit once decompressed")
            if not d.eof:
                raise MalformedRequest(f"{name} body is truncated")
            data = d.unused_data
    except zlib.error as exc:
        if name == "deflate" and wbits > 0 and not out:
            return _raw_deflate(body, limit)
        raise MalformedRequest(f"body is not valid {name} data ({exc})") from exc
    return bytes(out)


def _raw_deflate(body: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as exc:
        raise MalformedRequest(f"body is not valid deflate data ({exc})") from exc
    if len(out) > limit:
        raise RequestTooLarge(f"body is over the {limit}-byte limit once decompressed")
    return out


def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    message = ExportTraceServiceRequest()
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise MalformedRequest(f"body is not a protobuf ExportTraceServiceRequest ({exc})") from exc
    return message


def parse_json(data: bytes | str) -> ExportTraceServiceRequest:
    """An OTLP/JSON ``ExportTraceServiceRequest`` from its text."""
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        raise MalformedRequest(f"JSON body is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise MalformedRequest(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise MalformedRequest("invalid JSON: nested too deeply") from exc
    if not isinstance(doc, dict):
        raise MalformedRequest("an OTLP/JSON body is a JSON object with a resourceSpans list")
    _ids_to_base64(doc)
    message = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as exc:
        raise MalformedRequest(f"not an OTLP/JSON ExportTraceServiceRequest: {exc}") from exc
    return message


def _items(obj: Any, *keys: str) -> list[Any]:
    """The list under the first of ``keys`` (JSON names or proto field names); a wrong shape is left to
    the parser, which names it."""
    for key in keys:
        value = obj.get(key) if isinstance(obj, dict) else None
        if isinstance(value, list):
            return value
    return []


def _ids_to_base64(doc: dict[str, Any]) -> None:
    """Rewrite, in place, the hex span, parent and link ids of ``doc`` as the base64 the mapping wants."""
    for i, rs in enumerate(_items(doc, "resourceSpans", "resource_spans")):
        for j, ss in enumerate(_items(rs, "scopeSpans", "scope_spans")):
            for k, span in enumerate(_items(ss, "spans")):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                _fix_ids(span, where)
                for n, link in enumerate(_items(span, "links")):
                    _fix_ids(link, f"{where}.links[{n}]")


def _fix_ids(obj: Any, where: str) -> None:
    if not isinstance(obj, dict):
        return
    for key, size in _ID_BYTES.items():
        value = obj.get(key)
        if value is None or value == "":
            continue
        try:
            raw = bytes.fromhex(value) if isinstance(value, str) else None
        except ValueError:
            raw = None
        if raw is None or len(raw) != size:
            raise MalformedRequest(
                f"{where}.{key}: {str(value)[:40]!r} is not a {size * 2}-digit hex id (OTLP/JSON ids are hex)"
            )
        obj[key] = base64.b64encode(raw).decode("ascii")


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    if which == "bytes_value":
        return binascii.hexlify(v.bytes_value).decode("ascii")
    return getattr(v, which)


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def _iso(ns: int) -> str | None:
    if not ns:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def _hex_id(raw: bytes, size: int, what: str, where: str) -> str:
    if len(raw) != size or not any(raw):
        got = raw.hex() or "none"
        raise MalformedRequest(f"{where}: {what} must be {size} bytes, not all zero (got {got})")
    return raw.hex()


def spans_of(request: ExportTraceServiceRequest) -> list[PlainSpan]:
    """Every span of ``request``, with its resource attributes and scope name; invalid ids are refused."""
    out: list[PlainSpan] = []
    for i, rs in enumerate(request.resource_spans):
        resource = _attributes(rs.resource.attributes)  # one dict per resource: stored JSON is encoded once
        for j, ss in enumerate(rs.scope_spans):
            scope = ss.scope.name or None
            for k, sp in enumerate(ss.spans):
                where = f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}]"
                out.append(PlainSpan(
                    trace_id=_hex_id(sp.trace_id, 16, "traceId", where),
                    span_id=_hex_id(sp.span_id, 8, "spanId", where),
                    parent_span_id=sp.parent_span_id.hex() or None,
                    name=sp.name,
                    kind=_KINDS.get(sp.kind, "INTERNAL"),
                    start_ns=sp.start_time_unix_nano or None,
                    end_ns=sp.end_time_unix_nano or None,
                    status_code=_STATUS.get(sp.status.code, "UNSET"),
                    status_message=sp.status.message or None,
                    attributes=_attributes(sp.attributes),
                    events=[{"name": e.name, "time": _iso(e.time_unix_nano),
                             "attributes": _attributes(e.attributes)} for e in sp.events],
                    resource=resource,
                    scope=scope,
                ))
    return out


def decode(body: bytes, content_type: str | None, content_encoding: str | None,
           limit: int) -> tuple[str, list[PlainSpan]]:
    """(media type, spans) of an OTLP/HTTP request body; an ``IngestError`` names what is wrong."""
    media = media_type(content_type)
    raw = decompress(body, content_encoding, limit)
    request = parse_protobuf(raw) if media == PROTOBUF else parse_json(raw)
    return media, spans_of(request)


def response_body(media: str, status: int = 200, message: str = "") -> bytes:
    """An empty ``ExportTraceServiceResponse``, or for an error a ``google.rpc.Status``, in ``media``."""
    if status == 200:
        return ExportTraceServiceResponse().SerializeToString() if media == PROTOBUF else b"{}"
    code = _RPC_CODES.get(status, 2)
    if media == PROTOBUF:
        return bytes(status_pb2.Status(code=code, message=message).SerializeToString())
    return json.dumps({"code": code, "message": message}).encode()
