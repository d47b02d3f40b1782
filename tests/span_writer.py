"""Real spans in every export container: ``python -m tests.span_writer MODEL_URL OUT_DIR``.

The scripted smolagents agent of ``framework_agent`` runs under OpenInference's smolagents
instrumentor (the pairing the public span-tree trace datasets were recorded with) on a real
``TracerProvider`` with the SDK's ``InMemorySpanExporter``. Its finished spans are then written by
the OTel exporter's own encoder as OTLP JSON (the reference) and by OTel's Zipkin exporter as Zipkin v2
JSON (what it posts to a Zipkin server, caught on loopback). The containers no installable package
writes beside the pins are serialised here from the same ``ReadableSpan`` values, by their public
layouts: a nested span tree, a Phoenix span dataframe (JSON records and Parquet) and Jaeger's JSON.
Run in its own process: instrumentors patch their SDK globally.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

KINDS = {0: "INTERNAL", 1: "SERVER", 2: "CLIENT", 3: "PRODUCER", 4: "CONSUMER"}


def _hex(n: int, size: int) -> str:
    return format(n, f"0{size}x")


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _status(span: Any) -> str:
    return span.status.status_code.name  # UNSET, OK, ERROR


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """Phoenix's dataframe holds OpenInference lists as lists of objects: unflatten the dotted keys."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node = root
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = list(value) if isinstance(value, tuple) else value
    return _lists(root)


def _lists(node: Any) -> Any:
    if isinstance(node, dict):
        items = {k: _lists(v) for k, v in node.items()}
        return [items[k] for k in sorted(items, key=int)] if items and all(k.isdigit() for k in items) else items
    return node


def _columns(node: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Phoenix's columns: objects flattened to dotted names, lists (of messages, of tools) kept whole."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out.update(_columns(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def tree(spans: list[Any]) -> dict[str, Any]:
    by_parent: dict[int | None, list[Any]] = {}
    for s in spans:
        by_parent.setdefault(s.parent.span_id if s.parent else None, []).append(s)

    def node(s: Any) -> dict[str, Any]:
        return {"trace_id": _hex(s.context.trace_id, 32), "span_id": _hex(s.context.span_id, 16),
                "parent_span_id": _hex(s.parent.span_id, 16) if s.parent else None, "span_name": s.name,
                "span_kind": KINDS[s.kind.value].title(), "timestamp": _iso(s.start_time),
                "duration": f"PT{(s.end_time - s.start_time) / 1e9:.6f}S", "status_code": _status(s).title(),
                "status_message": s.status.description or "", "span_attributes": dict(s.attributes),
                "resource_attributes": dict(s.resource.attributes), "scope_name": s.instrumentation_scope.name,
                "events": [{"name": e.name, "timestamp": _iso(e.timestamp), "attributes": dict(e.attributes)}
                           for e in s.events], "child_spans": [node(c) for c in by_parent.get(s.context.span_id, [])]}
    return {"trace_id": _hex(spans[0].context.trace_id, 32), "spans": [node(s) for s in by_parent.get(None, [])]}


def phoenix(spans: list[Any], *, nested_as_text: bool = False) -> list[dict[str, Any]]:
    """Rows of Phoenix's span dataframe; in Parquet, lists of message objects are kept as JSON text."""
    rows = []
    for s in spans:
        attributes = dict(s.attributes)
        row = {"name": s.name, "span_kind": attributes.get("openinference.span.kind", "UNKNOWN"),
               "parent_id": _hex(s.parent.span_id, 16) if s.parent else None,
               "start_time": _iso(s.start_time), "end_time": _iso(s.end_time), "status_code": _status(s),
               "status_message": s.status.description or "", "events": [],
               "context.span_id": _hex(s.context.span_id, 16), "context.trace_id": _hex(s.context.trace_id, 32)}
        columns = _columns(_nest(attributes), "attributes.")
        row.update({k: (json.dumps(v) if nested_as_text and isinstance(v, list) else v) for k, v in columns.items()})
        rows.append(row)
    return rows


def _tag(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "type": "bool", "value": value}
    if isinstance(value, int):
        return {"key": key, "type": "int64", "value": value}
    if isinstance(value, float):
        return {"key": key, "type": "float64", "value": value}
    return {"key": key, "type": "string", "value": json.dumps(list(value)) if isinstance(value, tuple) else str(value)}


def jaeger(spans: list[Any]) -> dict[str, Any]:
    out = []
    for s in spans:
        tags = [_tag(k, v) for k, v in s.attributes.items()] + [_tag("span.kind", KINDS[s.kind.value].lower())]
        if _status(s) != "UNSET":
            tags.append(_tag("otel.status_code", _status(s)))
        out.append({"traceID": _hex(s.context.trace_id, 32), "spanID": _hex(s.context.span_id, 16),
                    "operationName": s.name, "startTime": s.start_time // 1000,
                    "duration": (s.end_time - s.start_time) // 1000, "processID": "p1", "logs": [], "tags": tags,
                    "references": [{"refType": "CHILD_OF", "traceID": _hex(s.context.trace_id, 32),
                                    "spanID": _hex(s.parent.span_id, 16)}] if s.parent else []})
    service = str(spans[0].resource.attributes.get("service.name", "unknown"))
    return {"data": [{"traceID": out[0]["traceID"], "spans": out,
                      "processes": {"p1": {"serviceName": service, "tags": []}}}]}


def zipkin(spans: list[Any], *, max_tag_value_length: int = 1 << 30) -> bytes:
    """Zipkin v2 JSON as OTel's own Zipkin exporter posts it, caught by an HTTP server on loopback.

    The exporter cuts every tag value to 128 characters unless told otherwise; a user who keeps the
    messages and tool arguments of LLM spans raises ``max_tag_value_length`` (at 128, a tool call's
    arguments and the model's messages arrive cut, and no importer can put them back)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.exporter.zipkin.json import ZipkinExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    bodies: list[bytes] = []

    class Collector(BaseHTTPRequestHandler):  # a Zipkin server's POST /api/v2/spans, and nothing else
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            bodies.append(self.rfile.read(int(self.headers["content-length"])))
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Collector) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        exporter = ZipkinExporter(endpoint=f"http://127.0.0.1:{server.server_address[1]}/api/v2/spans",
                                  max_tag_value_length=max_tag_value_length)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        server.shutdown()
    [body] = bodies
    return body


def otlp_hex_ids(doc: dict[str, Any]) -> dict[str, Any]:
    """Protobuf's JSON writes bytes as base64; OTLP/JSON (the Collector's file exporter) writes ids as hex."""
    import base64
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


def main() -> None:
    url, out = sys.argv[1], Path(sys.argv[2])
    from google.protobuf.json_format import MessageToDict
    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from .framework_agent import smolagents_agent

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "span-writer"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    smolagents_agent(url)
    provider.force_flush()
    spans = list(memory.get_finished_spans())
    out.mkdir(parents=True, exist_ok=True)
    (out / "otlp.json").write_text(json.dumps(otlp_hex_ids(MessageToDict(encode_spans(spans)))))
    (out / "tree.json").write_text(json.dumps(tree(spans)))
    (out / "phoenix.json").write_text(json.dumps(phoenix(spans)))
    (out / "jaeger.json").write_text(json.dumps(jaeger(spans)))
    (out / "zipkin.json").write_bytes(zipkin(spans))
    import pyarrow as pa
    import pyarrow.parquet as pq
    rows = phoenix(spans, nested_as_text=True)
    names = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist would keep the first row's only
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows]), out / "phoenix.parquet")


if __name__ == "__main__":
    main()
