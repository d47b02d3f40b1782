"""The span-producing side: looptrace's own spans and the processors and exporter that carry them.

``Tracing`` sets up an OpenTelemetry ``TracerProvider`` whose processors hand each batch to the
``DuckDBSpanExporter``; the manual API (``manual``) and the Anthropic instrumentor (``anthropic``)
make the spans. The exporter maps a batch to records and gives them to the sink: it never writes
to the store or redacts by itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .exporter import DuckDBSpanExporter
    from .manual import RUN_STATUSES, LlmCall, Run, Step, ToolCall, current_run, current_step
    from .tracing import Tracing

__all__ = ["Tracing", "Run", "Step", "ToolCall", "LlmCall", "current_run", "current_step", "RUN_STATUSES",
           "DuckDBSpanExporter"]

# Imported on first use (looptrace.tracer.lazy): the CLI's collect command lives beside the
# receiver and must not pay for the OpenTelemetry SDK to list itself.
__getattr__, __dir__ = lazy_exports(__name__, {
    "Tracing": ".tracing",
    "DuckDBSpanExporter": ".exporter",
    **dict.fromkeys(("Run", "Step", "ToolCall", "LlmCall", "current_run", "current_step", "RUN_STATUSES"),
                    ".manual"),
})
