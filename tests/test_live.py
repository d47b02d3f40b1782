"""Runs while they run (issue 24): a run `looptrace collect` still holds open is in `runs` (``running``)
and `steps` while it runs (about 1 s after its spans are acknowledged; waited for, not timed: speed
belongs to `bench/`), is replaced (never duplicated) as its trace grows
and ends, survives ``kill -9`` of collect without leaving a stale ``running`` row, and the viewer shows it.

The agent is the real SDK with the real OTLP/HTTP exporter (one request per span, sent as each span
ends, as a live agent's are); collect is a real process, killed with SIGKILL and started again on a
port of its own behind a relay (tests/relay.py) that keeps the agent's endpoint fixed.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.otlp import OtlpReceiver, TraceBuffer
from looptrace.tracer.ingest.otlp.journal import prune
from looptrace.tracer.ingest.otlp.live import closing_rows, preview_rows
from looptrace.tracer.ingest.otlp.protocol import spans_of
from looptrace.tracer.records.spans import PlainSpan
from looptrace.tracer.sink import Sink
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import SIZE, screen_text
from looptrace.viewer.screens import RunScreen
from looptrace.viewer.widgets import RunsTable

from .conftest import PYTHON, ROOT, python_env, query
from .relay import Relay
from .test_ingest import provider

RUNS = "SELECT status, n_steps, ended_at IS NULL FROM runs"
# A run and its calls: (status, steps, model calls, tool calls).
STATE = ("SELECT status, n_steps, n_llm_calls, (SELECT count(*) FROM tool_calls) FROM runs")
# Steps shown once each: a preview replaced, never added to.
STEPS = "SELECT count(*), count(DISTINCT (run_id, step, call_index)) FROM steps"
LIVE_ROWS = ("SELECT (SELECT count(*) FROM live_traces), (SELECT count(*) FROM live_run_records), "
             "(SELECT count(*) FROM live_step_records), (SELECT count(*) FROM live_tool_call_records), "
             "(SELECT count(*) FROM live_llm_call_records)")


class Agent:
    """A GenAI agent's run whose spans the exporter sends as they end: ``step()`` adds a model call and
    its tool call (or the final answer), ``end()`` ends the run's root span."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.provider, self.tracer = provider(exporter)
        self.root = self.tracer.start_span("invoke_agent fixer", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "fixer", "gen_ai.request.model": "gpt-4o"})
        self.history: list[Any] = [{"role": "user", "parts": [{"type": "text", "content": "Fix the bug."}]}]
        self.steps = 0

    def step(self, *, final: bool = False) -> None:
        i = self.steps
        self.steps += 1
        reply = {"role": "assistant", "finish_reason": "stop" if final else "tool_call",
                 "parts": [{"type": "text", "content": "Done." if final else f"Reading {i}"}]}
        with trace.use_span(self.root, end_on_exit=False):
            with self.tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o", "gen_ai.usage.input_tokens": 1000 + 100 * i,
                    "gen_ai.usage.output_tokens": 20, "gen_ai.response.finish_reasons": [reply["finish_reason"]],
                    "gen_ai.input.messages": json.dumps(self.history), "gen_ai.output.messages": json.dumps([reply])}):
                pass
            self.history.append(reply)
            if final:
                return
            with self.tracer.start_as_current_span("execute_tool read_file", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": json.dumps({"path": f"{i}.txt"}),
                    "gen_ai.tool.call.result": f"line {i}"}):
                pass
            self.history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call_{i}"}]})

    def end(self) -> None:
        self.root.end()
        assert self.provider.force_flush()
        self.provider.shutdown()


def until(db: Path, sql: str, expected: Any, *, timeout: float = 30.0) -> float:
    """Seconds until ``sql`` over the store gives ``expected`` (polled); fails with the last answer."""
    started = time.monotonic()
    got: Any = None
    while time.monotonic() - started < timeout:
        if Path(f"{db}.segments").exists() or db.exists():
            got = query(db, sql)
            if got == expected:
                return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"{sql}: {got!r}, expected {expected!r} within {timeout} s")


def _collect(db: Path, relay: Relay) -> subprocess.Popen[str]:
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                             "--grpc-port", "off", "--settle", "0.5", "--diagnose-every", "0"],
                            cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    while "listening on" not in (line := proc.stdout.readline()):
        assert line, proc.stderr.read() if proc.stderr else ""
    relay.upstream = int(line.split("http://127.0.0.1:", 1)[1].split("/", 1)[0])
    return proc


@pytest.mark.slow
def test_a_run_still_going_is_shown_running_replaced_as_it_grows_and_once_when_it_ends(db: Path) -> None:
    with Relay() as relay:
        collect = _collect(db, relay)
        try:
            agent = Agent(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{relay.port}/v1/traces"))
            agent.step()  # acknowledged when it returns: the exporter sends each span as it ends
            # A model call and its tool call: one step so far, the run's root span still open.
            until(db, STATE, [("running", 1, 1, 1)])
            assert query(db, RUNS) == [("running", 1, True)]
            assert query(db, "SELECT tool, args->>'path' FROM tool_calls") == [("read_file", "0.txt")]
            assert query(db, STEPS) == [(1, 1)]
            agent.step()
            until(db, STATE, [("running", 2, 2, 2)])  # replaced, not added to
            assert query(db, STEPS) == [(2, 2)]
            collect.kill()  # SIGKILL: no flush; the journal holds the spans, the last preview stays
            collect.wait(timeout=30)
            relay.upstream = None
            assert query(db, STATE) == [("running", 2, 2, 2)]
            collect = _collect(db, relay)
            agent.step()
            until(db, STATE, [("running", 3, 3, 3)])
            assert query(db, STEPS) == [(3, 3)]
            agent.step(final=True)
            agent.end()
            until(db, STATE, [("ok", 4, 4, 3)])  # written once, over the preview
            assert query(db, STEPS) == [(4, 4)]
        finally:
            collect.send_signal(signal.SIGINT)
            collect.communicate(timeout=60)
    assert query(db, "SELECT count(*), min(status) FROM runs") == [(1, "ok")]  # no stale `running` row
    assert query(db, STEPS) == [(4, 4)]
    # Every preview revision (of both collects) stays until pruned; then only the closing row is left.
    assert query(db, LIVE_ROWS)[0][1] >= 2
    prune(str(db), remember=timedelta(minutes=15))
    assert query(db, LIVE_ROWS) == [(1, 0, 0, 0, 0)]
    prune(str(db), remember=timedelta(0))
    assert query(db, LIVE_ROWS) == [(0, 0, 0, 0, 0)]
    assert query(db, RUNS) == [("ok", 4, False)]


def _spans(memory: InMemorySpanExporter) -> list[PlainSpan]:
    spans = spans_of(encode_spans(memory.get_finished_spans()))
    memory.clear()
    return spans


def test_the_buffer_previews_an_open_trace_once_per_change_and_its_write_closes_it() -> None:
    memory = InMemorySpanExporter()
    agent = Agent(memory)
    agent.step()
    first = _spans(memory)
    buffer = TraceBuffer(settle=0.0, idle_timeout=None)
    buffer.add(first, 0.0)
    [(trace_id, spans)] = buffer.previews()
    assert len(spans) == 2 and buffer.previews() == []  # nothing came since
    buffer.add(first, 0.5)  # a client's retry: nothing new either
    assert buffer.previews() == []
    agent.step()
    buffer.add(_spans(memory), 1.0)
    assert [len(s) for _, s in buffer.previews()] == [4]
    assert not buffer.take(1.0).parts  # no root yet: previewed, not written
    agent.step(final=True)
    agent.end()
    buffer.add(_spans(memory), 2.0)
    assert buffer.previews() == []  # the root is in: written within settle, not previewed
    [part] = buffer.take(2.0).parts
    assert [(r["trace_id"], r["open"]) for r in part.rows["live_traces"]] == [(trace_id, False)]
    never = TraceBuffer(settle=0.0)  # a trace never previewed is written without a closing row
    never.add(spans, 0.0)
    assert "live_traces" not in never.take(0.0, everything=True).parts[0].rows


def test_a_running_run_is_not_diagnosed_and_a_late_preview_never_shows_over_the_written_run(db: Path) -> None:
    trace_id = "ab" * 16
    run = {"run_id": "r1", "recorded_at": _ts(1), "status": None, "ended_at": None, "trace_id": trace_id}
    step = {"run_id": "r1", "step": 1, "thought": "the key is sk-ant-api03-" + "x" * 90}
    sink = Sink(db)
    sink.write(preview_rows(trace_id, {"run_records": [run], "step_records": [step]}, 10))
    assert query(db, "SELECT run_id, status FROM runs") == [("r1", "running")]
    # Redacted like every record; listed in the manifest once, with the records of the written trace.
    assert query(db, "SELECT thought LIKE '%sk-ant%', count(*) OVER () FROM steps") == [(False, 1)]
    assert query(db, "SELECT count(*) FROM redactions") == [(0,)]
    assert analyze_store(Store(db)) == []  # nothing to diagnose while it runs
    final = {"run_records": [{**run, "recorded_at": _ts(2), "status": "ok", "ended_at": _ts(2)}],
             "step_records": [step, {**step, "step": 2}]}
    sink.write({**final, **closing_rows([trace_id], 20)})
    # A preview taken before the final write but landing after it (the flusher maps outside the lock).
    sink.write(preview_rows(trace_id, {"run_records": [run], "step_records": [step]}, 15))
    assert query(db, "SELECT run_id, status FROM runs") == [("r1", "ok")]
    assert query(db, STEPS) == [(2, 2)]
    assert query(db, "SELECT record, sum(n) FROM redactions GROUP BY ALL") == [("step_records", 2)]
    assert [r.status for r in analyze_store(Store(db))] == ["ok"]


def _ts(second: int) -> datetime:
    return datetime(2026, 1, 1, 0, 0, second)


def test_the_viewer_shows_a_running_run_and_its_live_refresh_picks_up_the_end(db: Path) -> None:
    memory = InMemorySpanExporter()
    agent = Agent(memory)
    agent.step()
    agent.step()

    with OtlpReceiver(db, port=None, settle=0.2) as receiver:
        assert receiver.ingest(_spans(memory))
        until(db, RUNS, [("running", 2, True)])

        def status(app: ViewerApp) -> str:
            table = app.screen.query_one(RunsTable)
            return " ".join(cell.plain if hasattr(cell, "plain") else str(cell) for cell in table.get_row_at(0)) \
                if table.row_count else ""

        async def main() -> None:
            app = ViewerApp(db, refresh_seconds=0.3)
            async with app.run_test(size=SIZE) as pilot:
                await _wait(pilot, lambda: "running" in status(app), "the running run never showed")
                await pilot.press("enter")  # the run screen: its steps so far, refreshed while it runs
                await _wait(pilot, lambda: isinstance(app.screen, RunScreen) and "2 steps" in screen_text(app)
                            and "running" in screen_text(app), "the running run's steps never showed")
                agent.step(final=True)
                agent.end()
                assert receiver.ingest(_spans(memory))
                await _wait(pilot, lambda: "3 steps" in screen_text(app) and "running" not in screen_text(app),
                            "the run screen's refresh never showed the end")
                await pilot.press("escape")
                await _wait(pilot, lambda: " ok " in f" {status(app)} ", "the runs table never showed the end")
                assert "running" not in status(app)

        asyncio.run(main())
    assert query(db, RUNS) == [("ok", 3, False)]


async def _wait(pilot: Any, ready: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, what
        await pilot.pause(0.1)
