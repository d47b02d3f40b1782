"""A step that is one model call: one span where the data needs one.

A client instrumentor (client.py) makes a step for each model call of an implicit run: the step begins
as the request goes and ends as the response arrives, its usage and cost are the call's, its thought is
the response's text. A ``looptrace.step`` span beside the ``chat`` span would repeat the same interval
and numbers, and cost a third of the spans the agent's thread makes and the exporter writes per call.
So this step has no span of its own: the call's ``chat`` span is its span, marked
``looptrace.step.of_call``, and ``tracer.records`` makes the step's row from it (the same columns a
``looptrace.step`` span gives). Its tool calls sit under the run.

Until the call's span exists (a guard decides first) the step has none: a request the guard refuses
makes no step at all, only the guard's stop on the run; a warning or reflection waits for the span.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span

from .manual import Step

if TYPE_CHECKING:
    from .manual import Run

__all__ = ["CallStep"]


class CallStep(Step):
    """``Step``'s interface over the span of the one ``LlmCall`` made in it (``step.llm_call``)."""

    owns_span = False

    def __init__(self, run: Run) -> None:  # noqa: D107 - Step.__init__ would start a span: not called
        self.run = run
        self.index = run._next_index()
        self._calls = 0
        self._lock = threading.Lock()
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cost_usd: float | None = None
        self._priced = True
        self.span: Span = trace.INVALID_SPAN  # not recording: nothing lands on it
        self._pid = os.getpid()
        self._events: list[tuple[str, Mapping[str, Any]]] = []

    def adopt(self, span: Span) -> None:
        """The call's span is made: it is the step's, with what was recorded before it existed."""
        self.span = span
        for name, attributes in self._events:
            span.add_event(name, attributes)
        self._events.clear()

    def record_event(self, name: str, attributes: Mapping[str, Any]) -> None:
        if self.span.is_recording():
            self.span.add_event(name, attributes)
        elif self.span is trace.INVALID_SPAN:
            self._events.append((name, attributes))

    @property
    def made(self) -> bool:
        """Whether the step exists: its call's span was made."""
        return self.span is not trace.INVALID_SPAN

    def add_usage(self, input_tokens: int, output_tokens: int, cost: float | None, context_tokens: int) -> None:
        # The call's own usage attributes are the step's (tracer.records reads them): no attribute to add.
        self._count_usage(input_tokens, output_tokens, cost)

    def end(self) -> None:
        """The call's span ends with the call: nothing of the step's own to end."""
