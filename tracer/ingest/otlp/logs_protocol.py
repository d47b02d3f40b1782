"""OTLP log requests decoded into ``PlainLog`` values: pure functions, no I/O (the logs' ``protocol.py``).

Protobuf and JSON bodies are parsed into the same ``ExportLogsServiceRequest`` by the official bindings;
OTLP/JSON's hex trace and span ids are rewritten to the base64 the mapping expects first, as for
traces. A record's trace and span ids are optional (a log need not be tied to a span); when present
they must be the right size. The event name is the record's ``event_name`` field, or the ``event.name``
attribute older SDKs wrote it as. Values are flattened to plain Python by the trace decoder's rules.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from . import protocol as otlp
from .events import PlainLog, log_id

__all__ = ["LOGS_PATH", "parse_logs_protobuf", "parse_logs_json", "logs_of", "decode_logs", "logs_response_body"]

LOGS_PATH = "/v1/logs"


def parse_logs_protobuf(body: bytes) -> ExportLogsServiceRequest:
    message = ExportLogsServiceRequest()
    try:
        message.ParseFromString(body)
    except DecodeError as exc:
        raise otlp.MalformedRequest(f"body is not a protobuf ExportLogsServiceRequest ({exc})") from exc
    return message


def parse_logs_json(data: bytes | str) -> ExportLogsServiceRequest:
    """An OTLP/JSON ``ExportLogsServiceRequest`` from its text."""
    try:
        doc = json.loads(data)
    except UnicodeDecodeError as exc:
        raise otlp.MalformedRequest(f"JSON body is not UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise otlp.MalformedRequest(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise otlp.MalformedRequest("invalid JSON: nested too deeply") from exc
    if not isinstance(doc, dict):
        raise otlp.MalformedRequest("an OTLP/JSON logs body is a JSON object with a resourceLogs list")
    for i, rl in enumerate(otlp._items(doc, "resourceLogs", "resource_logs")):
        for j, sl in enumerate(otlp._items(rl, "scopeLogs", "scope_logs")):
            for k, record in enumerate(otlp._items(sl, "logRecords", "log_records")):
                otlp._fix_ids(record, f"resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]")
    message = ExportLogsServiceRequest()
    try:
        json_format.ParseDict(doc, message, ignore_unknown_fields=True)
    except (json_format.ParseError, TypeError, ValueError, RecursionError) as exc:
        raise otlp.MalformedRequest(f"not an OTLP/JSON ExportLogsServiceRequest: {exc}") from exc
    return message


def _id(raw: bytes, size: int, what: str, where: str) -> str | None:
    if not raw or not any(raw):
        return None  # a record tied to no span
    if len(raw) != size:
        raise otlp.MalformedRequest(f"{where}: {what} must be {size} bytes (got {raw.hex()})")
    return raw.hex()


def logs_of(request: ExportLogsServiceRequest) -> list[PlainLog]:
    """Every log record of ``request``, with its resource attributes and scope name."""
    out: list[PlainLog] = []
    for i, rl in enumerate(request.resource_logs):
        resource = otlp._attributes(rl.resource.attributes)
        for j, sl in enumerate(rl.scope_logs):
            scope = sl.scope.name or None
            for k, r in enumerate(sl.log_records):
                where = f"resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]"
                attributes = otlp._attributes(r.attributes)
                name: Any = r.event_name or attributes.get("event.name")
                name = name if isinstance(name, str) and name else None
                body = otlp._value(r.body) if r.HasField("body") else None
                trace_id = _id(r.trace_id, 16, "traceId", where)
                span_id = _id(r.span_id, 8, "spanId", where)
                severity = r.severity_number or None
                time_ns, observed_ns = r.time_unix_nano or None, r.observed_time_unix_nano or None
                out.append(PlainLog(
                    log_id=log_id(trace_id, span_id, time_ns, observed_ns, name, severity, body, attributes),
                    trace_id=trace_id, span_id=span_id, time_ns=time_ns, observed_ns=observed_ns,
                    event_name=name, severity_text=r.severity_text or None, severity_number=severity,
                    body=body, attributes=attributes, resource=resource, scope=scope, seq=len(out)))
    return out


def decode_logs(body: bytes, content_type: str | None, content_encoding: str | None,
                limit: int) -> tuple[str, list[PlainLog]]:
    """(media type, log records) of an OTLP/HTTP logs body; an ``IngestError`` names what is wrong."""
    media = otlp.media_type(content_type)
    raw = otlp.decompress(body, content_encoding, limit)
    request = parse_logs_protobuf(raw) if media == otlp.PROTOBUF else parse_logs_json(raw)
    return media, logs_of(request)


def logs_response_body(media: str) -> bytes:
    """An empty ``ExportLogsServiceResponse`` in ``media`` (errors are ``protocol.response_body``'s)."""
    return ExportLogsServiceResponse().SerializeToString() if media == otlp.PROTOBUF else b"{}"
