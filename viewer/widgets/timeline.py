"""A run's step timeline: one line per step, keyed by step number; the diagnosed steps marked.

A run may have thousands of steps, so this is a ``LazyTable``: a step's cells are made when its line
is drawn (and once per ``show()`` to fit the columns), never kept for the whole run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..data import TimelineStep
from ..format import fmt_bytes, fmt_cost, fmt_int, short_args
from ..messages import StepHighlighted, StepSelected
from ..safe import safe
from .lazy_table import LazyTable

__all__ = ["Timeline", "step_cells", "HIGHLIGHT"]

HIGHLIGHT = "bold black on yellow"  # steps named by the primary diagnosis
# The error mark comes early so it is visible however narrow the table is; its type comes last.
COLUMNS = (("step", True), ("mark", False), ("err", False), ("tool", False), ("args", False), ("obs", True),
           ("tokens", True), ("context", True), ("cost", True), ("error", False))


def _tools(s: TimelineStep) -> str:
    named = [t for t in s.tools if t is not None]
    if not named:
        return "(answer)"
    if len(set(named)) == 1 and len(named) > 1:
        return f"{named[0]} ×{len(named)}"
    return ", ".join(named)


def step_cells(s: TimelineStep, diagnosed: tuple[int, int] | None) -> list[Text]:
    marked = diagnosed is not None and diagnosed[0] <= s.step <= diagnosed[1]
    args = short_args(s.args[0] if s.args else None, 26)
    if len(s.args) > 1:
        args += f" +{len(s.args) - 1}"
    error = ", ".join(s.error_types) or ("error" if s.is_error else "")
    return [
        Text(f"{s.step}", justify="right", style=HIGHLIGHT if marked else ""),
        Text("◆" if marked else " ", style="yellow"),
        Text("✗" if s.is_error else " ", style="bold red"),
        safe(_tools(s), newlines=False, width=24),
        safe(args, newlines=False, width=30),
        Text(fmt_bytes(s.observation_bytes), justify="right"),
        Text(fmt_int(s.input_tokens + s.output_tokens), justify="right"),
        Text(fmt_int(s.context_tokens), justify="right"),
        Text(fmt_cost(s.cost_usd), justify="right"),
        safe(error, newlines=False, width=32, style="bold red"),
    ]


COMPACT = 5  # columns kept beside a step view: step, marks, tool, args


class Timeline(LazyTable):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open step")]

    def __init__(self, *, compact: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns_shown = COLUMNS[:COMPACT] if compact else COLUMNS
        self.set_columns([Text("" if key in ("mark", "err") else key, justify="right" if numeric else "left")
                          for key, numeric in self.columns_shown])

    def show(self, steps: Sequence[TimelineStep], diagnosed: tuple[int, int] | None) -> None:
        shown = list(steps)
        n = len(self.columns_shown)
        self.set_rows([str(s.step) for s in shown], lambda i: step_cells(shown[i], diagnosed)[:n])

    @property
    def current_step(self) -> int | None:
        key = self.current_key
        return int(key) if key is not None else None

    def move_to_step(self, step: int) -> bool:
        return self.move_to_key(str(step))

    def row_highlighted(self, key: str) -> None:
        self.post_message(StepHighlighted(int(key)))

    def row_selected(self, key: str) -> None:
        self.post_message(StepSelected(int(key)))
