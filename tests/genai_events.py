"""An agent's trace whose content travels as GenAI log records, built with the real SDK: a test helper.

``event_trace`` records an ``invoke_agent`` run of model calls and tool calls through a real
``TracerProvider`` and ``LoggerProvider``; each model call's messages are a
``gen_ai.client.inference.operation.details`` record emitted in the span's context (what the official
instrumentor sends in ``EVENT_ONLY`` mode), with the spans carrying no content. ``span_trace`` is the same
run with the content on the spans (``SPAN_ONLY``). Both are encoded by the SDK's own OTLP encoders.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

DETAILS = "gen_ai.client.inference.operation.details"


def _turns(steps: int) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """(input messages, output messages) of each model call, GenAI parts shape."""
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": "Fix the bug."}]}]
    out = []
    for i in range(steps + 1):
        final = i == steps
        reply = {"role": "assistant", "finish_reason": "stop" if final else "tool_call",
                 "parts": [{"type": "text", "content": "Done." if final else f"Reading {i}"}]
                 + ([] if final else [{"type": "tool_call", "id": f"call_{i}", "name": "read_file",
                                       "arguments": {"path": f"{i}.txt"}}])}
        out.append(([dict(m) for m in history], [reply]))
        history += [reply] if final else [reply, {"role": "tool", "parts": [
            {"type": "tool_call_response", "id": f"call_{i}", "response": f"contents of {i}.txt"}]}]
    return out


def build(steps: int = 2, *, content_on_spans: bool = False, end_root: bool = True,
          ) -> tuple[ExportTraceServiceRequest, ExportLogsServiceRequest]:
    resource = Resource.create({"service.name": "events-test"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    tracer, logger = tp.get_tracer("events-test"), lp.get_logger("events-test")
    root = tracer.start_span("invoke_agent fixer", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fixer"})
    with trace.use_span(root, end_on_exit=end_root):
        for i, (inputs, outputs) in enumerate(_turns(steps)):
            content = {"gen_ai.input.messages": inputs, "gen_ai.output.messages": outputs}
            with tracer.start_as_current_span("chat gpt-4o") as span:
                span.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                                     "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10})
                if content_on_spans:
                    import json
                    span.set_attributes({k: json.dumps(v) for k, v in content.items()})
                else:
                    logger.emit(LogRecord(event_name=DETAILS, attributes={
                        "gen_ai.operation.name": "chat", **content}))  # type: ignore[dict-item]
            if i < steps:
                with tracer.start_as_current_span(f"execute_tool read_file", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                        "gen_ai.tool.call.id": f"call_{i}"}):
                    pass
    tp.shutdown()
    lp.shutdown()
    return encode_spans(spans.get_finished_spans()), encode_logs(logs.get_finished_logs())
