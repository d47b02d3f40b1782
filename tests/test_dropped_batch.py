"""A model call whose span batch the client dropped is shown missing, never as a duplicate (issue 40).

An agent instrumented with the OTel GenAI conventions sends its spans as they end through the real
OTLP/HTTP exporter to the real receiver (what ``looptrace collect`` runs). The receiver is away while
the spans of one step end (the model call and the tool call it asked for): the exporter retries until
its timeout and drops them, as it does when a collector restarts. Before, the lost step's tool call,
matched to no model call, was filed under the previous step, which then read as having done its work
twice, and nothing said a model call was missing. Now the step is read from the next request (which
repeats the conversation), shown as a step of its own whose model call is missing (a
``model_call_missing`` event; no model call row, its usage unknown), and the analyzer's verdict is the
one it gives the whole trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.cli.main import main
from looptrace.tracer.ingest.otlp.protocol import spans_of
from looptrace.tracer.store import Store
from looptrace.viewer.data import load_run, load_step
from looptrace.viewer.widgets.run_summary import summary_text
from looptrace.viewer.widgets.step_view import step_text
from looptrace.viewer.widgets.timeline import step_texts

from .conftest import query
from .relay import Relay

FILES = ["notes.txt"] * 5  # the same read five times, the same answer each time: stagnation, on the whole trace
LOST = 3  # the step whose spans are lost


class Reader:
    """A GenAI agent reading FILES in turn, then answering: each step a ``chat`` span whose response asks
    for one tool call (with its id), then the ``execute_tool`` span that ran it."""

    def __init__(self, provider: TracerProvider) -> None:
        self.tracer = provider.get_tracer("reader")
        self.root = self.tracer.start_span("invoke_agent reader", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reader", "gen_ai.request.model": "gpt-4o"})
        self.history: list[Any] = [{"role": "user", "parts": [{"type": "text", "content": "Summarise my notes."}]}]

    def chat(self, reply: dict[str, Any]) -> None:
        with trace.use_span(self.root, end_on_exit=False), self.tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 100 * len(self.history), "gen_ai.usage.output_tokens": 20,
                "gen_ai.input.messages": json.dumps(self.history), "gen_ai.output.messages": json.dumps([reply])}):
            pass
        self.history.append(reply)

    def step(self, i: int, path: str, between: Callable[[], None] = lambda: None) -> None:
        self.chat({"role": "assistant", "finish_reason": "tool_call", "parts": [
            {"type": "text", "content": f"Reading {path} (step {i})."},
            {"type": "tool_call", "id": f"call_{i}", "name": "read_file", "arguments": {"path": path}}]})
        between()
        with trace.use_span(self.root, end_on_exit=False), self.tracer.start_as_current_span(
                "execute_tool read_file", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": json.dumps({"path": path}),
                    "gen_ai.tool.call.result": f"contents of {path}"}):
            pass
        self.history.append({"role": "tool", "parts": [
            {"type": "tool_call_response", "id": f"call_{i}", "response": f"contents of {path}"}]})

    def answer(self) -> None:
        self.chat({"role": "assistant", "finish_reason": "stop", "parts": [{"type": "text", "content": "Done."}]})
        self.root.end()


STEPS = "SELECT step, call_index, thought, tool, args->>'path', observation FROM steps ORDER BY step, call_index"


def _provider(*exporters: Any) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "reader-service"}))
    for exporter in exporters:
        provider.add_span_processor(SimpleSpanProcessor(exporter))  # a request per span, as each ends
    return provider


def _verdicts(db: Path) -> list[tuple[str, int | None, int | None]]:
    analyze_store(Store(db))
    return query(db, "SELECT label, first_step, last_step FROM diagnoses WHERE is_primary")


@pytest.mark.slow  # the exporter's retries until it gives up (1 s a span)
@pytest.mark.parametrize("lost", [("chat",), ("chat", "execute_tool")])
def test_a_dropped_batch_shows_a_missing_model_call_and_no_duplicate(tmp_path: Path, lost: tuple[str, ...]) -> None:
    """The model call's span lost alone (its tool call was filed under the previous step, twice), or with
    its tool call's span (the step vanished)."""
    lossy, whole = tmp_path / "lossy.duckdb", tmp_path / "whole.duckdb"
    memory = InMemorySpanExporter()  # every span the agent made: the whole trace, to compare with
    with OtlpReceiver(lossy, port=0, grpc_port=None, settle=0.2) as receiver, Relay() as relay:
        provider = _provider(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{relay.port}/v1/traces", timeout=1),
                             memory)
        agent = Reader(provider)

        def away(gone: bool) -> None:  # the collector is away (or back): the spans that end meanwhile drop
            relay.upstream = None if gone else receiver.port
            relay.drop_connections()  # and the exporter's kept-alive connection with it

        for i, path in enumerate(FILES, 1):
            away(i == LOST)
            agent.step(i, path, between=lambda: away(i == LOST and "execute_tool" in lost))
        relay.upstream = receiver.port
        agent.answer()
        provider.shutdown()
    made = memory.get_finished_spans()
    assert len(made) == 2 + 2 * len(FILES)
    assert query(lossy, "SELECT count(*) FROM spans") == [(len(made) - len(lost),)]
    with OtlpReceiver(whole, port=None, settle=0.2) as receiver:  # the same spans, none lost
        assert receiver.ingest(spans_of(encode_spans(made)))

    # The same steps as the whole trace: the lost one read from the next request, none filed twice.
    steps = query(lossy, STEPS)
    assert steps == query(whole, STEPS)
    assert [s[0] for s in steps] == list(range(1, len(FILES) + 2))
    assert steps[LOST - 1] == (LOST, 0, f"Reading {FILES[LOST - 1]} (step {LOST}).", "read_file", FILES[LOST - 1],
                               f"contents of {FILES[LOST - 1]}")
    # Shown as missing: no model call row, its usage unknown, the event saying why.
    assert query(lossy, "SELECT list(step ORDER BY step) FROM llm_calls") == [
        ([s for s in range(1, len(FILES) + 2) if s != LOST],)]
    [(tokens, cost, events)] = query(lossy, "SELECT input_tokens, cost_usd, events FROM steps WHERE step = ?", [LOST])
    assert tokens is None and cost is None
    [event] = json.loads(events)
    assert event["name"] == "model_call_missing" and event["attributes"]["tool_call_ids"] == [f"call_{LOST}"]
    assert query(whole, "SELECT count(*) FROM steps WHERE events IS NOT NULL") == [(0,)]

    # The analyzer reads the run the agent had (it said ok: a streak of four reads, or one broken by a step
    # that seemed to read twice), not one with a step done twice or gone.
    assert _verdicts(lossy) == _verdicts(whole) == [("stagnation", 1, len(FILES))]

    # The viewer: the timeline marks the step, the step view says its model call is missing.
    [(run_id,)] = query(lossy, "SELECT run_id FROM runs")
    detail = load_run(Store(lossy), run_id)
    assert detail is not None
    assert [s.step for s in detail.steps if s.call_missing] == [LOST]
    assert "1 model call missing from the trace (step 3)" in summary_text(detail).plain
    assert "model call missing" in step_texts(detail.steps[LOST - 1], False)[-1]
    step = load_step(Store(lossy), run_id, LOST)
    assert step is not None
    text = step_text(step).plain
    assert "missing: the trace lost this step's model call" in text and "tokens unknown" in text
    # The HTML report says it too.
    out = tmp_path / "run.html"
    assert main(["report", run_id, "--db", str(lossy), "-o", str(out)]) == 0
    page = out.read_text()
    step = page[page.index(f'id="step-{LOST}"'):]
    assert "model call missing: the trace lost it" in step[:step.index("</section>")]
