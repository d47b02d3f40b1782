"""A run still going (issue 24): how soon ``looptrace collect`` shows it, and what that costs the views.

- Seconds from a step's spans being acknowledged to the run being in ``runs`` (``running``) with that
  step in ``steps``, ``tool_calls`` and ``llm_calls``: a real ``collect --settle 0.5`` process, the real
  OTLP/HTTP exporter sending each span as it ends (``SimpleSpanProcessor``: acknowledged when the span's
  ``end()`` returns), one model call and its tool call at a time, the store polled every 20 ms by a
  reader session (which absorbs the segments: part of what "queryable" costs). The baseline column is
  the goal itself (2 s, the issue's); before previews the run showed only when its root span ended.
- What the previews cost the views with no run open: ``steps`` of one run and ``count(*)`` of
  ``llm_calls`` over a generated store, against the same views without their previews branch (the
  records' branch alone: the views as they were before schema version 8).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from looptrace.tracer.store import Store
from looptrace.tracer.store import views

from .bulkstore import make_bulk_store
from .results import Result
from .rounds import median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "live_runs: a run still going, from acknowledged spans to `runs`/`steps` (collect's previews)"
GOAL_SECONDS = 2.0
STATE = "SELECT status, n_steps, n_llm_calls, (SELECT count(*) FROM tool_calls) FROM runs"
_ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state(db: Path) -> list[tuple[Any, ...]]:
    if not db.exists() and not Path(f"{db}.segments").exists():
        return []
    with Store(db).reader(locked_down=False) as conn:
        return conn.execute(STATE).fetchall()


def _step(tracer: trace.Tracer, root: trace.Span, i: int) -> None:
    """A GenAI model call asking for a tool, then the tool call, under the open root span."""
    reply = {"role": "assistant", "finish_reason": "tool_call", "parts": [{"type": "text", "content": f"step {i}"}]}
    with trace.use_span(root, end_on_exit=False):
        with tracer.start_as_current_span("chat gpt-4o", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 20,
                "gen_ai.output.messages": json.dumps([reply])}):
            pass
        with tracer.start_as_current_span("execute_tool read_file", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": json.dumps({"path": f"{i}.txt"}),
                "gen_ai.tool.call.result": f"line {i}"}):
            pass


def _ack_to_visible(tmp: Path, steps: int) -> list[float]:
    db = tmp / "live.duckdb"
    port = _free_port()
    collect = subprocess.Popen([sys.executable, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port",
                                str(port), "--grpc-port", "off", "--settle", "0.5", "--diagnose-every", "0"],
                               cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert collect.stdout is not None
    while "listening on" not in (line := collect.stdout.readline()):
        if not line:
            raise RuntimeError(f"collect did not start: {collect.stderr.read() if collect.stderr else ''}")
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-live"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    tracer = provider.get_tracer("bench-live")
    root = tracer.start_span("invoke_agent bench", attributes={"gen_ai.operation.name": "invoke_agent",
                                                                 "gen_ai.agent.name": "bench"})
    seconds = []
    try:
        for i in range(1, steps + 1):
            _step(tracer, root, i)
            acked = time.monotonic()
            while _state(db) != [("running", i, i, i)]:
                if time.monotonic() - acked > 30:
                    raise RuntimeError(f"step {i} not shown after 30 s: {_state(db)}")
                time.sleep(0.02)
            seconds.append(time.monotonic() - acked)
        root.end()
        provider.shutdown()
    finally:
        collect.send_signal(signal.SIGINT)
        collect.communicate(timeout=60)
    return seconds


def _view_cost(tmp: Path, steps: int) -> list[Result]:
    db = make_bulk_store(tmp / "bulk.duckdb", steps)
    queries = {"one run's steps": "SELECT * FROM {steps} WHERE run_id = 'run00000042' ORDER BY step",
               "count(*) of llm_calls": "SELECT count(*) FROM {llm_calls}"}
    out = []
    with Store(db).reader(locked_down=False) as conn:
        for name, sql in (("steps", views.STEPS), ("llm_calls", views.LLM_CALLS)):
            records_only = sql.split("\nUNION ALL\n", 1)[0].replace(f"VIEW {name} AS", f"VIEW {name}_records AS")
            conn.execute(records_only)
        for what, sql in queries.items():
            times: dict[str, list[float]] = {"": [], "_records": []}
            for _ in range(21):
                for suffix, got in times.items():
                    query = sql.format(steps=f"steps{suffix}", llm_calls=f"llm_calls{suffix}")
                    started = time.perf_counter()
                    conn.execute(query).fetchall()
                    got.append(time.perf_counter() - started)
            new, old = median(times[""][1:]) * 1000, median(times["_records"][1:]) * 1000
            out.append(Result(f"{what}, {steps:,} steps, no run open", "ms", new, old, "<= +10 ms",
                              new - old <= 10.0, "baseline: the view without its previews branch"))
    return out


def run(quick: bool = False) -> list[Result]:
    with scratch_dir("live_runs") as tmp:
        seconds = _ack_to_visible(tmp, 5 if quick else 20)
        results = [Result(f"ack to visible, median of {len(seconds)} steps", "s", median(seconds), GOAL_SECONDS,
                          f"<= {GOAL_SECONDS:g} s", median(seconds) <= GOAL_SECONDS,
                          f"max {max(seconds):.2f} s"),
                   Result(f"ack to visible, slowest of {len(seconds)} steps", "s", max(seconds), GOAL_SECONDS,
                          f"<= {GOAL_SECONDS:g} s", max(seconds) <= GOAL_SECONDS)]
        return results + _view_cost(tmp, 200_000 if quick else 2_000_000)
