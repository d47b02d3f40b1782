"""The newest GenAI span shapes, sent by ``opentelemetry-util-genai`` (the helpers recent instrumentations
build on; the `frameworks` extra): a workflow run above its agents' runs, ``create_agent`` and ``plan``
spans, ``cache_write`` usage and content kept elsewhere and referenced (``*.ref``).

A two-agent workflow is recorded through util-genai's real ``TelemetryHandler`` with a real tracer and
logger provider, in ``SPAN_ONLY`` (content on spans) and ``EVENT_ONLY`` (content in
``gen_ai.client.inference.operation.details`` log records) alike, and sent to a receiver as the SDK
encodes it. ``create_agent`` and ``plan``, which util-genai 1.1 has no helper for, are spans of the
conventions' shape made with the same tracer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.logs_protocol import logs_of
from looptrace.tracer.ingest.otlp.protocol import spans_of

from .conftest import query

REF = "file:///uploads/3f2a/output.json"


def _record(mode: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", mode)
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import InputMessage, OutputMessage, Text, ToolCallRequest, ToolCallResponse

    resource = Resource.create({"service.name": "workflow-test"})
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
    tracer = tp.get_tracer("workflow-test")

    def chat(inputs: list[Any], outputs: list[Any], **attributes: Any) -> None:
        with handler.inference("openai", request_model="gpt-4o-mini") as call:
            call.input_messages = inputs
            call.output_messages = outputs
            call.input_tokens, call.output_tokens = 1000, 20
            call.attributes.update(attributes)

    task = InputMessage("user", [Text("Triage the bug report.")])
    with handler.workflow(name="triage"):
        with tracer.start_as_current_span("create_agent reader", attributes={
                "gen_ai.operation.name": "create_agent", "gen_ai.agent.name": "reader",
                "gen_ai.provider.name": "openai"}):
            pass
        with handler.invoke_local_agent(agent_name="reader", request_model="gpt-4o-mini"):
            with tracer.start_as_current_span("plan reader", attributes={"gen_ai.operation.name": "plan"}):
                call = ToolCallRequest(arguments={"path": "bug.txt"}, name="read_file", id="call_1")
                chat([task], [OutputMessage("assistant", [call], "tool_calls")],
                     **{"gen_ai.usage.cache_write.input_tokens": 300})
            with handler.tool("read_file", tool_call_id="call_1") as tool:
                tool.arguments, tool.tool_result = {"path": "bug.txt"}, "NullPointerException in main"
            result = InputMessage("tool", [ToolCallResponse(response="NullPointerException in main", id="call_1")])
            chat([task, InputMessage("assistant", [call]), result],
                 [OutputMessage("assistant", [Text("A null pointer in main.")], "stop")],
                 **{"gen_ai.output.messages.ref": REF})
        with handler.invoke_local_agent(agent_name="writer", request_model="gpt-4o-mini"):
            chat([InputMessage("user", [Text("Write it up.")])],
                 [OutputMessage("assistant", [Text("Filed as BUG-1.")], "stop")])
    tp.shutdown()
    lp.shutdown()
    return encode_spans(spans.get_finished_spans()), encode_logs(logs.get_finished_logs())


@pytest.mark.parametrize("mode", ["SPAN_ONLY", "EVENT_ONLY"])
def test_a_workflow_of_two_agents_from_util_genai(mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    span_request, log_request = _record(mode, monkeypatch)
    db = tmp_path / "store.duckdb"
    with OtlpReceiver(db, port=None, settle=0.2) as receiver:
        assert receiver.ingest_logs(logs_of(log_request))
        assert receiver.ingest(spans_of(span_request))
    assert receiver.stats.logs_received == (3 if mode == "EVENT_ONLY" else 0)
    runs = {agent: (parent, n) for agent, parent, n in query(db, "SELECT agent, parent_run_id, n_steps FROM runs")}
    [workflow] = query(db, "SELECT run_id FROM runs WHERE agent = 'triage'")
    # The workflow is a run above its agents' runs; create_agent and plan are no run and no call.
    assert runs == {"triage": (None, 0), "reader": (workflow[0], 2), "writer": (workflow[0], 1)}
    steps = query(db, "SELECT agent, step, thought, tool, args, observation FROM steps JOIN runs USING (run_id) "
                      "ORDER BY agent, step")
    assert [(a, s, th, t, json.loads(x) if x else None, o) for a, s, th, t, x, o in steps] == [
        ("reader", 1, None, "read_file", {"path": "bug.txt"}, "NullPointerException in main"),
        ("reader", 2, "A null pointer in main.", None, None, None),
        ("writer", 1, "Filed as BUG-1.", None, None, None)]
    # cache_write is read as the cache-creation count; a reference is kept as it came, never fetched.
    assert query(db, "SELECT cache_creation_tokens FROM llm_calls WHERE cache_creation_tokens IS NOT NULL") == [(300,)]
    refs = query(db, "SELECT json_extract_string(attributes, '$.\"gen_ai.output.messages.ref\"') FROM spans "
                     "WHERE attributes LIKE '%messages.ref%'")
    assert refs == [(REF,)]
    assert query(db, "SELECT count(*) FROM spans WHERE name IN ('create_agent reader', 'plan reader')") == [(2,)]
