"""looptrace's tracer: OpenTelemetry spans for agent loops, exported into a DuckDB store.

    from looptrace.tracer import Tracing
    with Tracing("traces.duckdb") as tracing, tracing.run("my-agent", task="...") as run:
        with run.step("I should look around") as step:
            with step.tool_call("ls", {"path": "."}) as call:
                call.result("a.txt b.txt")
        run.finish("ok", answer="done")

Names are imported on first use (``lazy.py``): every ``looptrace`` command imports this package,
and most of them never need the OpenTelemetry SDK behind ``Tracing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

if TYPE_CHECKING:
    from .guard import Finding, Guard, GuardTripped
    from .records.pricing import Price, cost_usd, set_price
    from .spans.exporter import DuckDBSpanExporter
    from .spans.manual import RUN_STATUSES, LlmCall, Run, Step, ToolCall, current_run, current_step
    from .spans.tracing import Tracing
    from .store import DEFAULT_DB, SCHEMA_VERSION, Store, StoreError

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
    "Guard",
    "GuardTripped",
    "Finding",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Tracing": ".spans.tracing",
    **dict.fromkeys(("Run", "Step", "ToolCall", "LlmCall", "current_run", "current_step", "RUN_STATUSES"),
                    ".spans.manual"),
    "DuckDBSpanExporter": ".spans.exporter",
    **dict.fromkeys(("Store", "StoreError", "SCHEMA_VERSION", "DEFAULT_DB"), ".store"),
    **dict.fromkeys(("Price", "set_price", "cost_usd"), ".records.pricing"),
    **dict.fromkeys(("Guard", "GuardTripped", "Finding"), ".guard"),
})
