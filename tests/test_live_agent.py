"""A run still going is shown under the agent its calls name, not the process's ``service.name`` (issue 40).

Until the root span (``invoke_agent fixer``) arrives, a preview has no agent span to read the name from; it
took the resource's ``service.name``, so ``agent:fixer`` in the viewer missed the run while it ran. The
calls' own ``gen_ai.agent.name`` names it now, and the root's name wins once it lands. Spans are made by
the real OTel SDK and taken by the real receiver (as ``looptrace collect`` takes them), the viewer is the
real app driven by Pilot.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from textual.widgets import Input

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.protocol import spans_of
from looptrace.tracer.records.spans import PlainSpan
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import settle
from looptrace.viewer.widgets import RunsTable

from .conftest import query
from .test_ingest import provider
from .test_live import until

AGENTS = "SELECT agent, status FROM runs ORDER BY agent"


def _step(tracer: trace.Tracer, root: trace.Span, i: int, agent: str | None) -> None:
    """A model call and the tool call it asked for; each names its agent when ``agent`` is given."""
    named = {"gen_ai.agent.name": agent} if agent else {}
    reply = {"role": "assistant", "parts": [{"type": "tool_call", "id": f"c{i}", "name": "read_file",
                                             "arguments": {"path": f"{i}.txt"}}]}
    with trace.use_span(root, end_on_exit=False):
        with tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o", **named,
                "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 10,
                "gen_ai.output.messages": json.dumps([reply])}):
            pass
        with tracer.start_as_current_span("execute_tool read_file", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file", **named,
                "gen_ai.tool.call.id": f"c{i}", "gen_ai.tool.call.result": f"line {i}"}):
            pass


def _spans(memory: InMemorySpanExporter) -> list[PlainSpan]:
    spans = spans_of(encode_spans(memory.get_finished_spans()))
    memory.clear()
    return spans


def _row_texts(app: ViewerApp) -> list[str]:
    table = app.screen.query_one(RunsTable)
    return [" ".join(c.plain if hasattr(c, "plain") else str(c) for c in table.get_row_at(i))
            for i in range(table.row_count)]


@pytest.mark.slow
def test_a_running_run_is_shown_and_filtered_under_its_calls_agent(db: Path) -> None:
    memory = InMemorySpanExporter()
    p, tracer = provider(memory)  # resource service.name "ingest-test"
    named = tracer.start_span("invoke_agent fixer", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fixer"})
    # Calls that name no agent: only the root knows it, so until then the service's name is all there is.
    bare = tracer.start_span("invoke_agent tidier", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "tidier"})
    _step(tracer, named, 0, "fixer")
    _step(tracer, bare, 0, None)

    with OtlpReceiver(db, port=None, settle=0.2) as receiver:
        assert receiver.ingest(_spans(memory))
        until(db, AGENTS, [("fixer", "running"), ("ingest-test", "running")])  # it said ingest-test twice
        [(fixer,)] = query(db, "SELECT run_id FROM runs WHERE agent = 'fixer'")

        async def scenario() -> None:
            app = ViewerApp(db, refresh_seconds=0.3)
            async with app.run_test(size=(160, 48)) as pilot:
                await settle(pilot)
                await pilot.press("slash")
                app.screen.query_one(Input).value = "agent:fixer"
                await pilot.press("enter")
                await settle(pilot)
                [row] = _row_texts(app)  # the filter finds it while it runs (the table may cut the name)
                assert app.screen.query_one(RunsTable).keys() == [fixer] and "running" in row
                _step(tracer, named, 1, "fixer")
                named.end()
                bare.end()
                assert receiver.ingest(_spans(memory))
                deadline = time.monotonic() + 30
                while not any(" ok " in f" {r} " for r in _row_texts(app)):  # the live refresh: still found
                    assert time.monotonic() < deadline, _row_texts(app)
                    await pilot.pause(0.1)
                assert app.screen.query_one(RunsTable).keys() == [fixer]

        asyncio.run(scenario())
    # Written from the whole trace: each run under its root's agent (tidier's corrected from the service name).
    assert query(db, AGENTS) == [("fixer", "ok"), ("tidier", "ok")]
    p.shutdown()
