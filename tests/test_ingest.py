"""OTLP in: the receiver behind `looptrace collect`, the conventions mapping, and OTLP JSON imports.

Spans are made by the real SDK (a TracerProvider) with each convention's attribute names and sent by
the real OTLP/HTTP exporter to a receiver on 127.0.0.1; raw requests test the HTTP contract.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import http.client
import json
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue, KeyValueList
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode, Tracer

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer import Tracing
from looptrace.tracer.ingest.otlp import OtlpReceiver, classify, rows_for_trace, run_id_for
from looptrace.tracer.ingest.otlp.protocol import JSON, PROTOBUF, MalformedRequest, decode, parse_json, spans_of
from looptrace.tracer.records.spans import PlainSpan
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query

Build = Callable[[Tracer], Any]

# -- spans from the real SDK ----------------------------------------------------------------------------


def provider(exporter: SpanExporter) -> tuple[TracerProvider, Tracer]:
    p = TracerProvider(resource=Resource.create({"service.name": "ingest-test"}))
    p.add_span_processor(SimpleSpanProcessor(exporter))  # one request per span: traces arrive in pieces
    return p, p.get_tracer("ingest-test")


def genai_agent(tracer: Tracer, *, repeats: int = 6, end_root: bool = True) -> None:
    """An invoke_agent run that reads the same file ``repeats`` times, then answers (GenAI conventions)."""
    root = tracer.start_span("invoke_agent fixer", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fixer",
        "gen_ai.request.model": "gpt-4o"})
    history: list[Any] = [{"role": "user", "parts": [{"type": "text", "content": "Fix the bug."}]}]
    with trace.use_span(root, end_on_exit=end_root):
        for i in range(repeats + 1):
            final = i == repeats
            reply = {"role": "assistant", "finish_reason": "stop" if final else "tool_call",
                     "parts": [{"type": "text", "content": "Done." if final else f"Reading {i}"}]}
            with tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1000 + 100 * i,
                    "gen_ai.usage.output_tokens": 20,
                    "gen_ai.response.finish_reasons": [reply["finish_reason"]],
                    "gen_ai.input.messages": json.dumps(history),
                    "gen_ai.output.messages": json.dumps([reply])}):
                pass
            history.append(reply)
            if final:
                break
            with tracer.start_as_current_span("execute_tool read_file", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": '{"path": "a.txt"}',
                    "gen_ai.tool.call.result": "print('hello')"}):
                pass
            history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call_{i}"}]})


def finished_spans(build: Build) -> Sequence[ReadableSpan]:
    memory = InMemorySpanExporter()
    p, tracer = provider(memory)
    build(tracer)
    p.shutdown()
    return memory.get_finished_spans()


def request_of(build: Build) -> ExportTraceServiceRequest:
    return encode_spans(finished_spans(build))


def to_otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """OTLP/JSON as the spec writes it: protobuf's JSON mapping, with hex trace and span ids."""
    doc = json_format.MessageToDict(request)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = base64.b64decode(span[key]).hex()
    return doc


# -- talking to a receiver ------------------------------------------------------------------------------


@pytest.fixture
def receiver(db: Path) -> Iterator[OtlpReceiver]:
    with OtlpReceiver(db, port=0, settle=0) as r:
        yield r


def post(url: str, body: bytes, content_type: str = PROTOBUF, *, encoding: str | None = None,
         method: str = "POST", path: str | None = None) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    headers = {"content-type": content_type, **({"content-encoding": encoding} if encoding else {})}
    try:
        conn.request(method, path or parts.path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def send(url: str, build: Build) -> None:
    """Export the spans of ``build`` with the real OTLP/HTTP exporter, one request per span."""
    p, tracer = provider(OTLPSpanExporter(endpoint=url))
    build(tracer)
    assert p.force_flush()
    p.shutdown()


def error_message(media: str, body: bytes) -> str:
    if media == PROTOBUF:
        status = status_pb2.Status()
        status.ParseFromString(body)
        return status.message
    return str(json.loads(body)["message"])


COUNTS = ("SELECT (SELECT count(*) FROM spans), (SELECT count(*) FROM run_records), (SELECT count(*) FROM "
          "step_records), (SELECT count(*) FROM tool_call_records), (SELECT count(*) FROM llm_call_records)")


def counts(db: Path) -> tuple[int, ...]:
    """Rows of (spans, run_records, step_records, tool_call_records, llm_call_records)."""
    if not db.exists() and not Path(f"{db}.segments").exists():
        return (0, 0, 0, 0, 0)
    return tuple(query(db, COUNTS)[0])


# -- decoding --------------------------------------------------------------------------------------------


def test_protobuf_and_otlp_json_decode_to_the_same_spans() -> None:
    def build(tracer: Tracer) -> None:
        attributes: dict[str, Any] = {"s": "text", "i": 7, "f": 0.5, "b": True, "tags": ["a", "b"],
                                      "ns": [1, 2]}
        with tracer.start_as_current_span("outer", attributes=attributes) as span:
            span.add_event("checkpoint", {"n": 1})
            with tracer.start_as_current_span("inner") as inner:
                inner.set_status(Status(StatusCode.ERROR, "it broke"))

    request = request_of(build)
    _, from_protobuf = decode(request.SerializeToString(), PROTOBUF, None, 1 << 20)
    body = json.dumps(to_otlp_json(request)).encode()
    _, from_json = decode(body, "application/json; charset=utf-8", None, 1 << 20)
    assert from_protobuf == from_json
    inner, outer = from_protobuf
    assert outer.attributes == {"s": "text", "i": 7, "f": 0.5, "b": True, "tags": ["a", "b"], "ns": [1, 2]}
    assert outer.resource["service.name"] == "ingest-test" and outer.scope == "ingest-test"
    assert outer.events[0]["name"] == "checkpoint" and outer.events[0]["attributes"] == {"n": 1}
    assert inner.parent_span_id == outer.span_id and outer.parent_span_id is None
    assert len(outer.trace_id) == 32 and len(outer.span_id) == 16
    assert (inner.status_code, inner.status_message, inner.kind) == ("ERROR", "it broke", "INTERNAL")


def test_kvlist_and_bytes_attributes_are_flattened() -> None:
    request = request_of(lambda t: t.start_span("s").end())
    nested = KeyValueList(values=[KeyValue(key="k", value=AnyValue(int_value=1)),
                                  KeyValue(key="raw", value=AnyValue(bytes_value=b"\x00\xff"))])
    span = request.resource_spans[0].scope_spans[0].spans[0]
    span.attributes.append(KeyValue(key="map", value=AnyValue(kvlist_value=nested)))
    assert spans_of(request)[0].attributes["map"] == {"k": 1, "raw": "00ff"}


def test_otlp_json_ids_must_be_hex() -> None:
    request = request_of(lambda t: t.start_span("s").end())
    with pytest.raises(MalformedRequest, match="hex"):
        parse_json(json.dumps(json_format.MessageToDict(request)))  # ids left in base64


# -- conventions (pure) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("attributes", "role"), [
    ({"gen_ai.operation.name": "invoke_agent"}, "agent"),
    ({"gen_ai.operation.name": "chat"}, "model"),
    ({"gen_ai.operation.name": "execute_tool"}, "tool"),
    ({"gen_ai.operation.name": "embeddings"}, None),
    ({"openinference.span.kind": "AGENT"}, "agent"),
    ({"openinference.span.kind": "CHAIN"}, "workflow"),
    ({"openinference.span.kind": "LLM"}, "model"),
    ({"openinference.span.kind": "TOOL"}, "tool"),
    ({"openinference.span.kind": "RETRIEVER"}, None),
    ({"traceloop.span.kind": "workflow"}, "workflow"),
    ({"traceloop.span.kind": "agent"}, "agent"),
    ({"traceloop.span.kind": "task"}, "tool"),
    ({"traceloop.span.kind": "tool"}, "tool"),
    ({"llm.request.type": "chat", "gen_ai.system": "openai"}, "model"),
    ({"http.method": "GET"}, None),
])
def test_classify(attributes: dict[str, Any], role: str | None) -> None:
    assert classify(PlainSpan("t" * 32, "s" * 16, None, "x", attributes=attributes)) == role


def plain(span_id: str, parent: str | None, start: int, attributes: dict[str, Any]) -> PlainSpan:
    return PlainSpan("a" * 32, span_id.rjust(16, "0"), parent.rjust(16, "0") if parent else None, "x",
                     start_ns=start * 1000, end_ns=start * 1000 + 500, attributes=attributes)


CHAT = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 10}
AGENT = {"gen_ai.operation.name": "invoke_agent"}


def tool(name: str) -> dict[str, Any]:
    return {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}


def test_steps_group_a_model_call_with_the_tool_calls_after_it() -> None:
    spans = [
        plain("1", None, 0, {**AGENT, "gen_ai.agent.name": "a"}),
        plain("2", "1", 1, tool("setup")),  # before any model call: a leading step
        plain("3", "1", 2, CHAT),
        plain("4", "1", 3, tool("ls")), plain("5", "1", 3, tool("cat")),  # parallel calls of one response
        plain("6", "1", 4, CHAT),
        plain("7", "6", 5, {**CHAT, "llm.request.type": "chat"}),  # the same call, seen by a second library
        plain("8", "1", 6, {"http.method": "GET"}),  # no convention: in spans only
    ]
    rows = rows_for_trace(spans, source="test")
    assert [(r["step"], r["call_index"], r["tool"]) for r in rows["tool_call_records"]] == [
        (1, 0, "setup"), (2, 0, "ls"), (2, 1, "cat")]
    assert [r["step"] for r in rows["step_records"]] == [1, 2, 3]
    assert [r["step"] for r in rows["llm_call_records"]] == [2, 3]
    run_id = run_id_for("a" * 32, "1".rjust(16, "0"))
    assert [r["run_id"] for r in rows["run_records"]] == [run_id]
    assert [r["run_id"] for r in rows["spans"]] == [run_id] * len(spans)
    again = rows_for_trace(list(reversed(spans)), source="test")  # the order of arrival does not matter
    def canonical(out: dict[str, list[Any]]) -> dict[str, list[str]]:
        return {table: sorted(map(repr, r)) for table, r in out.items()}

    assert canonical(again) == canonical(rows)


def test_a_sub_agent_is_its_own_run_and_late_spans_go_to_spans_only() -> None:
    spans = [
        plain("1", None, 0, {**AGENT, "gen_ai.agent.name": "boss"}),
        plain("2", "1", 1, CHAT),
        plain("3", "1", 2, tool("delegate")),
        plain("4", "3", 3, {**AGENT, "gen_ai.agent.name": "worker"}),
        plain("5", "4", 4, CHAT),
    ]
    rows = rows_for_trace(spans, source="test")
    runs = {r["agent"]: r for r in rows["run_records"]}
    assert runs["worker"]["parent_run_id"] == runs["boss"]["run_id"]
    assert [(r["run_id"], r["step"]) for r in rows["llm_call_records"]] == [
        (runs["boss"]["run_id"], 1), (runs["worker"]["run_id"], 1)]
    stored = {r["span_id"]: r["run_id"] for r in rows["spans"]}
    late = rows_for_trace([*spans, plain("6", "5", 5, tool("x"))], source="test", stored=stored)
    assert list(late) == ["spans"] and late["spans"][0]["run_id"] == runs["worker"]["run_id"]


def test_clashing_flattened_keys_stay_in_spans() -> None:
    llm = {"openinference.span.kind": "LLM", "llm.input_messages.0.message": "odd",
           "llm.input_messages.0.message.role": "user"}
    agent = plain("1", None, 0, {"openinference.span.kind": "AGENT"})
    rows = rows_for_trace([agent, plain("2", "1", 1, llm)], source="test")
    kept = json.loads(next(r for r in rows["spans"] if r["span_id"].endswith("2"))["attributes"])
    assert kept["llm.input_messages.0.message.role"] == "user"  # not placed in the messages: not dropped


# -- the receiver, with the real exporter -----------------------------------------------------------------


def test_genai_trace_becomes_a_run_and_its_stagnation_is_diagnosed(receiver: OtlpReceiver, db: Path) -> None:
    send(receiver.url, genai_agent)
    assert receiver.stats.requests == 14 and receiver.stats.traces_written == 1
    [(run_id, *run)] = query(db, "SELECT run_id, source, agent, task, model, status, n_steps, input_tokens, "
                                 "output_tokens, answer FROM runs")
    input_tokens = sum(range(1000, 1700, 100))
    assert run == ["otlp", "fixer", "Fix the bug.", "gpt-4o", "ok", 7, input_tokens, 140, "Done."]
    steps = query(db, "SELECT step, thought, tool, args, observation, context_tokens FROM steps "
                      "ORDER BY step")
    assert steps[0] == (1, "Reading 0", "read_file", '{"path": "a.txt"}', "print('hello')", 1000)
    assert steps[-1] == (7, "Done.", None, None, None, 1600)
    llm = query(db, "SELECT step, provider, input_tokens, output_tokens, stop_reason, messages_keep "
                    "FROM llm_calls ORDER BY step")
    assert llm[0] == (1, "openai", 1000, 20, "tool_call", 0) and llm[1][5] == 1  # requests stored as deltas
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM spans") == [(14, 1)]
    [result] = analyze_store(Store(db), run_ids=[run_id])
    assert result.primary is not None and result.primary.label == "stagnation"
    assert result.primary.evidence["repeats"] == 6 and result.primary.first_step == 1
    assert query(db, "SELECT label FROM diagnoses WHERE is_primary") == [("stagnation",)]


def test_openinference_trace(receiver: OtlpReceiver, db: Path) -> None:
    def build(tracer: Tracer) -> None:
        agent = {"openinference.span.kind": "AGENT", "input.value": "What is 2+2?", "output.value": "4"}
        llm: dict[str, Any] = {
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "llm.token_count.prompt": 50,
            "llm.token_count.completion": 7, "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "What is 2+2?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "I will use the calculator.",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "calculator"}
        calculator = {"openinference.span.kind": "TOOL", "tool.name": "calculator"}
        with tracer.start_as_current_span("AgentExecutor", attributes=agent):
            chain = {"openinference.span.kind": "CHAIN"}
            with tracer.start_as_current_span("RunnableSequence", attributes=chain):
                tracer.start_span("ChatOpenAI", attributes=llm).end()
            tracer.start_span("calculator", attributes={
                **calculator, "input.value": '{"expr": "2+2"}', "output.value": "4"}).end()
            tracer.start_span("retriever", attributes={"openinference.span.kind": "RETRIEVER"}).end()
            failing = {**calculator, "input.value": "2/0"}
            with tracer.start_as_current_span("calculator", attributes=failing) as span:
                span.record_exception(ZeroDivisionError("division by zero"))
                span.set_status(Status(StatusCode.ERROR, "division by zero"))

    send(receiver.url, build)
    assert query(db, "SELECT agent, task, answer, status, n_steps, input_tokens FROM runs") == [
        ("AgentExecutor", "What is 2+2?", "4", "ok", 1, 50)]
    thought = "I will use the calculator."
    assert query(db, "SELECT step, call_index, thought, tool, args, observation, is_error, error_type "
                     "FROM steps ORDER BY call_index") == [
        (1, 0, thought, "calculator", '{"expr": "2+2"}', "4", False, None),
        (1, 1, thought, "calculator", '"2/0"', "division by zero", True, "ZeroDivisionError")]
    assert query(db, "SELECT model, input_tokens, output_tokens FROM llm_calls") == [("gpt-4o-mini", 50, 7)]
    assert query(db, "SELECT count(*) FROM spans WHERE name = 'retriever' AND run_id IS NOT NULL") == [(1,)]


def test_openllmetry_trace(receiver: OtlpReceiver, db: Path) -> None:
    def llm(tracer: Tracer, prompt: str, completion: str, tokens: int) -> None:
        tracer.start_span("openai.chat", attributes={
            "llm.request.type": "chat", "gen_ai.system": "OpenAI", "gen_ai.request.model": "gpt-4o",
            "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": prompt,
            "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": completion,
            "gen_ai.completion.0.finish_reason": "stop",
            "gen_ai.usage.prompt_tokens": tokens, "gen_ai.usage.completion_tokens": 5}).end()

    def build(tracer: Tracer) -> None:
        workflow = {"traceloop.span.kind": "workflow", "traceloop.entity.name": "support"}
        with tracer.start_as_current_span("support.workflow", attributes=workflow):
            plan = {"traceloop.span.kind": "task", "traceloop.entity.name": "plan"}
            with tracer.start_as_current_span("plan.task", attributes=plan):
                llm(tracer, "Where is my order?", "Let me search.", 30)  # a task around a model call: wrapper
            tracer.start_span("search.tool", attributes={
                "traceloop.span.kind": "tool", "traceloop.entity.name": "search",
                "traceloop.entity.input": '{"args": ["order 42"], "kwargs": {}}',
                "traceloop.entity.output": '"shipped"'}).end()
            llm(tracer, "It shipped.", "Your order has shipped.", 60)

    send(receiver.url, build)
    assert query(db, "SELECT agent, task, status, n_steps, input_tokens, answer FROM runs") == [
        ("support", "Where is my order?", "ok", 2, 90, "Your order has shipped.")]
    assert query(db, "SELECT step, thought, tool, args, observation FROM steps ORDER BY step") == [
        (1, "Let me search.", "search", '{"args": ["order 42"], "kwargs": {}}', '"shipped"'),
        (2, "Your order has shipped.", None, None, None)]
    assert query(db, "SELECT stop_reason, input_tokens, output_tokens FROM llm_calls ORDER BY step") == [
        ("stop", 30, 5), ("stop", 60, 5)]


def test_unknown_spans_are_kept_and_make_no_run(receiver: OtlpReceiver, db: Path) -> None:
    def build(tracer: Tracer) -> None:
        with tracer.start_as_current_span("GET /orders", attributes={"http.method": "GET"}):
            tracer.start_span("SELECT orders", attributes={"db.system": "postgresql"}).end()

    send(receiver.url, build)
    assert query(db, "SELECT name, run_id, attributes->>'$.\"db.system\"' FROM spans ORDER BY name") == [
        ("GET /orders", None, None), ("SELECT orders", None, "postgresql")]
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]


def test_a_trace_without_its_root_is_written_at_stop_as_incomplete(db: Path) -> None:
    receiver = OtlpReceiver(db, port=0, settle=0).start()
    send(receiver.url, lambda t: genai_agent(t, repeats=2, end_root=False))  # the agent span never ends
    assert counts(db)[0] == 0 and receiver.stats.spans_received == 5  # held: the trace may still be running
    receiver.stop()
    [(run_id, status, ended, n_steps, trace_id)] = query(
        db, "SELECT run_id, status, ended_at, n_steps, trace_id FROM runs")
    assert (status, ended, n_steps) == ("incomplete", None, 3)
    [(parent,)] = query(db, "SELECT DISTINCT parent_span_id FROM spans")
    assert run_id == run_id_for(trace_id, parent)  # the id the agent span would have given it
    assert query(db, "SELECT spans_received, spans_written, spans_dropped FROM writer_stats") == [(5, 5, 0)]


def test_a_trace_in_pieces_and_resent_is_written_once(receiver: OtlpReceiver, db: Path) -> None:
    spans = finished_spans(lambda t: genai_agent(t, repeats=2))
    children = encode_spans(spans[:-1]).SerializeToString()
    root = encode_spans(spans[-1:]).SerializeToString()
    assert post(receiver.url, children)[0] == 200 and counts(db) == (0, 0, 0, 0, 0)
    assert post(receiver.url, root)[0] == 200
    assert counts(db) == (6, 1, 3, 2, 3)
    for body in (children, root, encode_spans(spans).SerializeToString()):  # a client retrying
        assert post(receiver.url, body)[0] == 200
    assert counts(db) == (6, 1, 3, 2, 3) and receiver.stats.duplicate_spans == 12
    late = request_of(lambda t: t.start_span("late").end())
    span = late.resource_spans[0].scope_spans[0].spans[0]
    span.trace_id = spans[-1].context.trace_id.to_bytes(16, "big")
    span.parent_span_id = spans[-1].context.span_id.to_bytes(8, "big")
    assert post(receiver.url, late.SerializeToString())[0] == 200
    assert counts(db) == (7, 1, 3, 2, 3) and receiver.stats.late_spans == 1
    assert query(db, "SELECT count(DISTINCT run_id), count(run_id) FROM spans") == [(1, 7)]


def test_json_and_gzip_bodies(receiver: OtlpReceiver, db: Path) -> None:
    def one_span(name: str) -> ExportTraceServiceRequest:
        return request_of(lambda t: t.start_span(name).end())

    requests = [one_span(f"span {i}") for i in range(4)]
    as_json = [json.dumps(to_otlp_json(r)).encode() for r in requests]
    for body, media, encoding in [(as_json[0], JSON, None), (gzip.compress(as_json[1]), JSON, "gzip"),
                                  (gzip.compress(requests[2].SerializeToString()), PROTOBUF, "gzip"),
                                  (requests[3].SerializeToString(), PROTOBUF, None)]:
        status, headers, answer = post(receiver.url, body, media, encoding=encoding)
        assert (status, headers["content-type"]) == (200, media)
        assert answer == (b"{}" if media == JSON else b"")  # an empty ExportTraceServiceResponse
    assert query(db, "SELECT name FROM spans ORDER BY name") == [(f"span {i}",) for i in range(4)]


def _half_bad_json() -> bytes:
    """Two spans, the second with a broken id: the first must not be written either."""
    doc = to_otlp_json(request_of(lambda t: (t.start_span("a").end(), t.start_span("b").end())))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["spanId"] = "xyz"
    return json.dumps(doc).encode()


@pytest.mark.parametrize(("body", "media", "encoding", "status", "message"), [
    (b"not a protobuf", PROTOBUF, None, 400, "not a protobuf ExportTraceServiceRequest"),
    (b'{"resourceSpans": [', JSON, None, 400, "invalid JSON"),
    (b"[1, 2]", JSON, None, 400, "JSON object"),
    (b'{"resourceSpans": [{"scopeSpans": 7}]}', JSON, None, 400, "not an OTLP/JSON ExportTraceService"),
    (_half_bad_json(), JSON, None, 400, "spans[1].spanId"),
    (b"\x1f\x8b broken", PROTOBUF, "gzip", 400, "not valid gzip"),
    (b"hello", "text/plain", None, 415, "unsupported Content-Type"),
    (b"", PROTOBUF, "br", 415, "unsupported Content-Encoding"),
])
def test_a_bad_request_changes_nothing_and_the_receiver_keeps_serving(
        receiver: OtlpReceiver, db: Path, body: bytes, media: str, encoding: str | None, status: int,
        message: str) -> None:
    got, headers, answer = post(receiver.url, body, media, encoding=encoding)
    assert got == status and message in error_message(headers["content-type"], answer)
    assert counts(db) == (0, 0, 0, 0, 0)
    assert post(receiver.url, request_of(genai_agent).SerializeToString())[0] == 200
    assert counts(db) == (14, 1, 7, 6, 7)


def test_a_failed_write_answers_503_and_the_retry_loses_nothing(db: Path) -> None:
    obstacle = Path(f"{db}.segments")
    obstacle.write_text("a file where the segments folder goes")  # every segment write fails
    body = request_of(genai_agent).SerializeToString()
    with OtlpReceiver(db, port=0, settle=0) as receiver:
        status, headers, answer = post(receiver.url, body)
        assert (status, headers["retry-after"]) == (503, "1")
        assert "could not write to the store" in error_message(PROTOBUF, answer)
        obstacle.unlink()
        assert post(receiver.url, body)[0] == 200  # the client's retry
    assert counts(db) == (14, 1, 7, 6, 7)
    [(written, errors)] = query(db, "SELECT spans_written, write_errors FROM writer_stats")
    assert written == 14 and errors >= 1


def test_other_paths_and_methods_and_the_connection_stays_usable(receiver: OtlpReceiver) -> None:
    parts = urlsplit(receiver.url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)  # keep-alive
    answers = []
    for method, path, media, body in [("POST", "/v1/metrics", PROTOBUF, b"\xff" * 64),
                                      ("PUT", parts.path, JSON, b"{}"),
                                      ("POST", parts.path, "text/plain", b"x"),
                                      ("POST", parts.path, PROTOBUF, b"")]:  # an empty request is a valid one
        conn.request(method, path, body=body, headers={"content-type": media})
        response = conn.getresponse()
        answers.append((response.status, response.getheader("allow"), response.read()))
    conn.close()
    assert [(status, allow) for status, allow, _ in answers] == [(404, None), (405, "POST"), (415, None),
                                                                 (200, None)]
    assert "POST" in error_message(JSON, answers[1][2])


def test_a_value_the_store_refuses_costs_only_its_own_traces_runs(receiver: OtlpReceiver, db: Path) -> None:
    request = request_of(genai_agent)
    poisoned = request_of(lambda t: t.start_span("chat m", attributes={
        "gen_ai.operation.name": "chat", "looptrace.run.id": "r1", "looptrace.step.index": 1}).end())
    span = poisoned.resource_spans[0].scope_spans[0].spans[0]
    name = KeyValue(key="name", value=AnyValue(string_value="m"))
    model = AnyValue(kvlist_value=KeyValueList(values=[name]))
    span.attributes.append(KeyValue(key="gen_ai.request.model", value=model))  # not text: ArrowTypeError
    request.resource_spans.extend(poisoned.resource_spans)
    assert post(receiver.url, request.SerializeToString())[0] == 200
    assert counts(db) == (15, 1, 7, 6, 7)  # the poisoned trace kept as a bare span; the other one whole
    assert query(db, "SELECT run_id, attributes->>'$.\"gen_ai.request.model\".name' FROM spans "
                     "WHERE name = 'chat m'") == [("r1", "m")]
    stats = receiver.stats
    assert (stats.refused_traces, stats.lost_spans, stats.write_errors) == (1, 0, 0)
    assert post(receiver.url, request_of(lambda t: t.start_span("after").end()).SerializeToString())[0] == 200
    assert counts(db)[0] == 16  # and nothing is stuck behind it


@pytest.mark.slow
def test_a_20_mb_attribute_is_stored_intact_and_the_limit_is_enforced(db: Path, tmp_path: Path) -> None:
    blob = ("0123456789abcdef" * (20 << 16))[:-3] + "END"  # 20 MiB
    with OtlpReceiver(db, port=0, settle=0) as receiver:
        send(receiver.url, lambda t: t.start_span("big", attributes={"blob": blob}).end())
        [(size, digest)] = query(db, "SELECT length(attributes->>'$.blob'), md5(attributes->>'$.blob') "
                                     "FROM spans")
        assert (size, digest) == (len(blob), hashlib.md5(blob.encode()).hexdigest())
    small = tmp_path / "small.duckdb"
    with OtlpReceiver(small, port=0, settle=0, max_body=1 << 20) as receiver:
        big = request_of(lambda t: t.start_span("big", attributes={"blob": blob[:2 << 20]}).end())
        status, _, answer = post(receiver.url, big.SerializeToString())
        assert status == 413 and "over the 1048576-byte limit" in error_message(PROTOBUF, answer)
        bomb = gzip.compress(big.SerializeToString())  # small on the wire, too big once decompressed
        assert post(receiver.url, bomb, encoding="gzip")[0] == 413
        send(receiver.url, lambda t: t.start_span("small").end())
        assert query(small, "SELECT name FROM spans") == [("small",)]


def test_looptrace_spans_sent_over_otlp_map_as_they_do_locally(receiver: OtlpReceiver, db: Path) -> None:
    tracing = Tracing(None, otlp_endpoint=receiver.url)
    with tracing.run("native", task="t", model="scripted") as run:
        with run.step("look") as step, step.tool_call("ls", {"path": "."}) as call:
            call.result("a.txt")
        run.finish("ok", answer="done")
    tracing.shutdown()
    assert query(db, "SELECT source, agent, status, n_steps, answer FROM runs") == [
        ("looptrace", "native", "ok", 1, "done")]
    assert query(db, "SELECT tool, args, observation FROM steps") == [("ls", '{"path":"."}', "a.txt")]


@pytest.mark.slow
def test_two_processes_export_at_once(receiver: OtlpReceiver, db: Path) -> None:
    procs = [subprocess.Popen([PYTHON, "-m", "tests.otlp_sender", receiver.url, tag, "20", "20"], cwd=ROOT,
                              env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for tag in ("p1", "p2")]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.startswith("sent 820 spans"), err
    assert query(db, "SELECT count(*), count(DISTINCT span_id) FROM spans") == [(1640, 1640)]
    assert query(db, "SELECT count(*), sum(n_steps), count(DISTINCT agent) FROM runs "
                     "WHERE status = 'ok'") == [(40, 800, 40)]
    assert receiver.stats.duplicate_spans == 0 and receiver.stats.late_spans == 0


@pytest.mark.slow
def test_collect_command(db: Path) -> None:
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                             "--grpc-port", "off"], cwd=ROOT,
                            env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line
        url = line.split("listening on ", 1)[1].split(",", 1)[0]
        send(url, genai_agent)
        send(url, lambda t: genai_agent(t, repeats=1, end_root=False))
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "17 spans written in 2 traces (1 incomplete" in out
    assert query(db, "SELECT agent, status, n_steps FROM runs ORDER BY status") == [
        ("ingest-test", "incomplete", 2), ("fixer", "ok", 7)]


def test_otlp_json_file_import_gives_the_receivers_rows_and_twice_adds_nothing(
        receiver: OtlpReceiver, db: Path, tmp_path: Path) -> None:
    spans = finished_spans(genai_agent)
    halves = [encode_spans(spans[:7]), encode_spans(spans[7:])]  # a trace cut in two batches, as exporters do
    for request in halves:
        assert post(receiver.url, request.SerializeToString())[0] == 200
    path = tmp_path / "traces.jsonl"
    path.write_text("".join(json.dumps(to_otlp_json(r)) + "\n" for r in halves))
    imported = tmp_path / "imported.duckdb"
    report = import_paths(Store(imported), [path])
    assert (report.runs_imported, report.steps_imported, report.by_format, report.skipped) == (
        1, 7, {"otlp-json": 1}, [])
    columns = {
        "runs": "run_id, agent, task, model, status, started_at, ended_at, n_steps, input_tokens, answer, "
                "trace_id",
        "steps": "run_id, step, call_index, started_at, thought, tool, args, observation, context_tokens",
        "llm_calls": "call_id, step, model, input_tokens, output_tokens, messages_keep, request_sha",
        "spans": "trace_id, span_id, parent_span_id, name, start_time, run_id, attributes, resource",
    }
    for view, cols in columns.items():
        sql = f"SELECT {cols} FROM {view} ORDER BY ALL"
        assert query(imported, sql) == query(db, sql), view
    assert query(imported, "SELECT source FROM runs") == [(str(path),)]
    again = import_paths(Store(imported), [path])
    assert (again.runs_imported, again.runs_present, again.steps_imported) == (0, 1, 0)
    assert counts(imported) == counts(db)
    pretty = tmp_path / "one.json"  # a single request, pretty-printed
    pretty.write_text(json.dumps(to_otlp_json(request_of(genai_agent)), indent=2))
    assert import_paths(Store(imported), [pretty]).runs_imported == 1
