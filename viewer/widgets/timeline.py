"""A run's step timeline: one line per step, keyed by step number; the diagnosed steps marked.

A run may have thousands of steps, so this is a ``LazyTable``: a step's cells are made when its line
is drawn, never kept for the whole run; fitting the columns measures plain strings (``step_texts``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..columns import Column
from ..data import TimelineStep
from ..format import call_error_kind, fmt_bytes, fmt_cost, fmt_int, short_args
from ..messages import StepHighlighted, StepSelected
from ..safe import safe_plain
from .lazy_table import LazyTable, fit

__all__ = ["Timeline", "step_cells", "step_texts", "HIGHLIGHT", "LAYOUT", "MARKS"]

HIGHLIGHT = "bold black on yellow"  # steps named by the primary diagnosis
# The error mark comes early so it is visible however narrow the table is; its type comes last.
COLUMNS = (("step", True), ("mark", False), ("err", False), ("tool", False), ("args", False), ("obs", True),
           ("tokens", True), ("context", True), ("cost", True), ("error", False))


def _tools(s: TimelineStep) -> str:
    named = [t for t in s.tools if t is not None]
    if not named:
        # No tool call: an answer, unless the model call failed (or the trace lost it).
        return "(call failed)" if s.call_error else "(call missing)" if s.call_missing else "(answer)"
    if len(set(named)) == 1 and len(named) > 1:
        return f"{named[0]} ×{len(named)}"
    return ", ".join(named)


def _tokens(s: TimelineStep) -> int | None:
    known = [n for n in (s.input_tokens, s.output_tokens) if n is not None]
    return sum(known) if known else None


def _marked(s: TimelineStep, diagnosed: tuple[int, int] | None) -> bool:
    return diagnosed is not None and diagnosed[0] <= s.step <= diagnosed[1]


def step_texts(s: TimelineStep, marked: bool) -> tuple[str, ...]:
    """What each column shows for ``s``, trace text made visible and clipped by ``safe_plain``.

    Plain strings, so fitting the columns of a long run measures them without building ``Text``.
    """
    args = short_args(s.args[0] if s.args else None, 26)
    if len(s.args) > 1:
        args += f" +{len(s.args) - 1}"
    error = ", ".join(s.error_types) or ("error" if s.is_error else "")
    if s.call_error:
        error = ", ".join(filter(None, (error, f"model call: {call_error_kind(s.call_error)}")))
    elif s.call_missing:
        error = ", ".join(filter(None, (error, "model call missing")))
    return (
        f"{s.step}", "◆" if marked else " ", "✗" if s.failed else " ",
        safe_plain(_tools(s), newlines=False, width=24), safe_plain(args, newlines=False, width=30),
        fmt_bytes(s.observation_bytes), fmt_int(_tokens(s)), fmt_int(s.context_tokens),
        fmt_cost(s.cost_usd), safe_plain(error, newlines=False, width=32),
    )


_STYLES = {"mark": "yellow", "err": "bold red", "error": "bold red"}


def step_cells(s: TimelineStep, diagnosed: tuple[int, int] | None) -> list[Text]:
    marked = _marked(s, diagnosed)
    return [
        Text(text, style=HIGHLIGHT if key == "step" and marked else _STYLES.get(key, ""),
             justify="right" if numeric else "left", end="")
        for text, (key, numeric) in zip(step_texts(s, marked), COLUMNS)
    ]


COMPACT = 5  # columns kept beside a step view: step, marks, tool, args

# Which columns give way first when the table is narrow (viewer.columns; 0 is kept longest): the step,
# its marks and what it did stay; the observation's size before the context's (the charts below the
# table draw the context per step); the error's type, then the cost, go first. ``least``: a tool or
# its arguments cut with an ellipsis rather than hidden.
PRIORITY = {"step": 0, "mark": 1, "err": 2, "tool": 3, "args": 4, "tokens": 5, "obs": 6, "context": 7,
            "error": 8, "cost": 9}
LEAST = {"tool": 10, "args": 16, "error": 12}
MARKS = {"mark": "◆", "err": "✗"}  # what the help calls the two columns without a heading
LAYOUT: tuple[Column, ...] = tuple(
    Column(key, "" if key in ("mark", "err") else key, PRIORITY[key], LEAST.get(key, 0), numeric)
    for key, numeric in COLUMNS)


class Timeline(LazyTable):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open")]

    def __init__(self, *, compact: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns_shown = COLUMNS[:COMPACT] if compact else COLUMNS
        # Beside a step view (at most half the screen) the arguments may be cut shorter.
        self.set_columns([replace(c, least=12) if c.key == "args" else c for c in LAYOUT[:COMPACT]]
                         if compact else LAYOUT)

    def show(self, steps: Sequence[TimelineStep], diagnosed: tuple[int, int] | None) -> None:
        shown = list(steps)
        n = len(self.columns_shown)
        widths = fit((step_texts(s, _marked(s, diagnosed))[:n] for s in shown), n)
        self.set_rows([str(s.step) for s in shown], lambda i: step_cells(shown[i], diagnosed)[:n], widths)

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
