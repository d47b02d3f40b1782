"""Cost per traced step: looptrace's ``Tracing`` vs. a bare OpenTelemetry SDK pipeline.

Both sides make the same two nested spans per step (a ``looptrace.step`` and an ``execute_tool ls``
under it) with the same attributes, inside one run span. looptrace's time includes
``Tracing.shutdown()``, because that is when the last batch becomes durable (segments fsynced, then
absorbed into the DuckDB file). The baseline's exporter throws spans away, so the ratio is the
price of looptrace's API and its durable store over the cheapest possible SDK setup.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Sequence

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from looptrace.tracer.records import conventions as c
from looptrace.tracer.spans.tracing import Tracing

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "tracer_overhead: cost per traced step (2 spans), flush included"
GOAL_RATIO = 3.0
ROUNDS = 5


class _NoopExporter(SpanExporter):
    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS


def _looptrace(steps: int) -> tuple[float, float]:
    """Seconds for the whole run, and the part of it spent in ``shutdown()``."""
    with scratch_dir("overhead") as tmp:
        t0 = time.perf_counter()
        tracing = Tracing(tmp / "bench.duckdb")
        with tracing.run("bench") as run:
            for _ in range(steps):
                with run.step("thought") as step:
                    with step.tool_call("ls", {"path": "."}) as call:
                        call.result("a b c")
        t1 = time.perf_counter()
        tracing.shutdown()
        t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def _baseline(steps: int) -> tuple[float, int]:
    """Seconds for the same spans through a stock BatchSpanProcessor, and how many it exported."""
    t0 = time.perf_counter()
    exporter = _NoopExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "looptrace"}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    tracer = provider.get_tracer("looptrace")
    run_id = uuid.uuid4().hex
    with tracer.start_as_current_span("invoke_agent bench") as root:
        root.set_attribute(c.GEN_AI_OPERATION, c.OP_INVOKE_AGENT)
        root.set_attribute(c.GEN_AI_AGENT_NAME, "bench")
        root.set_attribute(c.RUN_ID, run_id)
        root.set_attribute(c.RUN_SOURCE, "looptrace")
        root.set_attribute(c.RUN_PID, os.getpid())
        for index in range(1, steps + 1):
            with tracer.start_as_current_span(c.STEP_SPAN) as step:
                step.set_attribute(c.RUN_ID, run_id)
                step.set_attribute(c.STEP_INDEX, index)
                step.set_attribute(c.STEP_THOUGHT, "thought")
                with tracer.start_as_current_span("execute_tool ls") as call:
                    call.set_attribute(c.GEN_AI_OPERATION, c.OP_EXECUTE_TOOL)
                    call.set_attribute(c.GEN_AI_TOOL_NAME, "ls")
                    call.set_attribute(c.RUN_ID, run_id)
                    call.set_attribute(c.STEP_INDEX, index)
                    call.set_attribute(c.TOOL_CALL_INDEX, 0)
                    call.set_attribute(c.GEN_AI_TOOL_CALL_ARGUMENTS, json.dumps({"path": "."}))
                    call.set_attribute(c.GEN_AI_TOOL_CALL_RESULT, "a b c")
                step.set_attribute(c.GEN_AI_USAGE_INPUT_TOKENS, 0)
                step.set_attribute(c.GEN_AI_USAGE_OUTPUT_TOKENS, 0)
                step.set_attribute(c.STEP_COST, 0.0)
        root.set_attribute(c.RUN_STATUS, "ok")
    provider.shutdown()
    return time.perf_counter() - t0, exporter.exported


def run(quick: bool = False) -> list[Result]:
    steps = 2_000 if quick else 20_000
    _looptrace(200)  # warm-up: imports, cached Arrow schemas, the DuckDB extension load
    _baseline(200)
    ours, theirs = alternate(ROUNDS, lambda: _looptrace(steps), lambda: _baseline(steps))
    us_ours = median([t for t, _ in ours]) / steps * 1e6
    us_theirs = median([t for t, _ in theirs]) / steps * 1e6
    flush_ms = median([f for _, f in ours]) * 1e3
    exported = min(n for _, n in theirs)
    ratio = us_ours / us_theirs
    note = (
        f"{steps:,} steps x {ROUNDS} rounds, medians; looptrace shutdown (last flush + compaction) "
        f"{flush_ms:.0f} ms of each run; baseline exported >= {exported:,} of {2 * steps + 1:,} spans"
    )
    return [
        Result(
            "per step", "us/step", us_ours, us_theirs, f"ratio <= {GOAL_RATIO:g}x", ratio <= GOAL_RATIO, note
        )
    ]
