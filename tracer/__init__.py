"""looptrace's tracer: OpenTelemetry spans for agent loops, exported into a DuckDB store.

    from looptrace.tracer import Tracing
    with Tracing("traces.duckdb") as tracing, tracing.run("my-agent", task="...") as run:
        with run.step("I should look around") as step:
            with step.tool_call("ls", {"path": "."}) as call:
                call.result("a.txt b.txt")
        run.finish("ok", answer="done")
"""

from __future__ import annotations

from .spans.exporter import DuckDBSpanExporter
from .spans.manual import RUN_STATUSES, LlmCall, Run, Step, ToolCall, current_run, current_step
from .records.pricing import Price, cost_usd, set_price
from .store import DEFAULT_DB, SCHEMA_VERSION, Store, StoreError
from .spans.tracing import Tracing

__all__ = [
    "Tracing",
    "Run",
    "Step",
    "ToolCall",
    "LlmCall",
    "current_run",
    "current_step",
    "RUN_STATUSES",
    "DuckDBSpanExporter",
    "Store",
    "StoreError",
    "SCHEMA_VERSION",
    "DEFAULT_DB",
    "Price",
    "set_price",
    "cost_usd",
]
