"""A run beside its replay or fork: one line per aligned pair of steps, divergent pairs marked.

Each side shows its step number, its action (tools and arguments, as ``looptrace diff`` compares
them) and its tokens; a step only one run has leaves the other side blank. Keys are pair indexes.
A failed step says so before its action, with its error (``✗ FileNotFoundError · read_file ...``,
``✗ call failed: BadRequestError 400``): first, so that a narrow column cuts the arguments, not the
failure.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from looptrace.replay.diff import Aligned, StepFacts

from ..columns import Column
from ..format import call_error_kind, fmt_int
from ..messages import StepSelected
from ..safe import safe_plain
from .lazy_table import LazyTable, fit

__all__ = ["DiffTable", "pair_texts", "LAYOUT", "NAMES"]

ACTION_WIDTH = 58
DIVERGED = "bold yellow"  # an action that differs from the other run's at the same place
FIRST = "bold black on yellow"  # the first divergence's mark


FAILED = "bold red"  # a side's failure, before its action


def _failure(facts: StepFacts) -> str:
    """What failed in the step, in a few words ("" for none): its model call's error, or its tools'."""
    if facts.call_error is not None and not facts.action:
        return f"✗ call failed: {call_error_kind(facts.call_error)}"
    kinds = [facts.call_error and f"model call: {call_error_kind(facts.call_error)}", *dict.fromkeys(facts.tool_errors)]
    return "✗ " + ", ".join(filter(None, kinds)) if facts.failed else ""


def _action(facts: StepFacts) -> str:
    failure = _failure(facts)
    if facts.call_error is not None and not facts.action:
        return failure
    action = facts.action or "(answer)"
    return f"{failure} · {action}" if failure else action


def _side(facts: StepFacts | None) -> tuple[str, str, str]:
    if facts is None:
        return "", "", ""
    return str(facts.step), safe_plain(_action(facts), newlines=False, width=ACTION_WIDTH), fmt_int(facts.tokens)


def pair_texts(pair: Aligned) -> tuple[str, ...]:
    """The line's columns as plain strings: mark, then each side's step, action and tokens."""
    return ("=" if pair.same else "≠", *_side(pair.a), *_side(pair.b))


# (heading, right-aligned)
COLUMNS = (("", False), ("step", True), ("original", False), ("tokens", True),
           ("step", True), ("this run", False), ("tokens", True))
# Narrow, the tokens go first, then the two sides' actions are cut (viewer.columns; 0 is kept longest).
LAYOUT: tuple[Column, ...] = (
    Column("mark", "", 0), Column("a_step", "step", 1, right=True), Column("a_action", "original", 3, least=12),
    Column("a_tokens", "tokens", 5, right=True), Column("b_step", "step", 2, right=True),
    Column("b_action", "this run", 4, least=12), Column("b_tokens", "tokens", 6, right=True),
)
NAMES = {"mark": "= or ≠", "a_step": "the original's step", "b_step": "this run's step",
         "a_tokens": "the original's tokens", "b_tokens": "this run's tokens"}  # for the help


class DiffTable(LazyTable):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open step")]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.pairs: list[Aligned] = []
        self.first: int | None = None
        self.runs: tuple[str, str] = ("", "")  # the original's id, this run's
        self.set_columns(LAYOUT)

    def show(self, runs: tuple[str, str], pairs: list[Aligned], first: int | None) -> None:
        self.runs, self.pairs, self.first = runs, pairs, first
        widths = fit((pair_texts(p) for p in pairs), len(COLUMNS))
        self.set_rows([str(i) for i in range(len(pairs))], self._pair_cells, widths)

    def _pair_cells(self, index: int) -> list[Text]:
        pair = self.pairs[index]
        texts = pair_texts(pair)
        differs = not pair.same
        styles = [FIRST if index == self.first else ("yellow" if differs else "dim"), "",
                  DIVERGED if differs else "", "", "", DIVERGED if differs else "", ""]
        cells = [Text(text, style=style, justify="right" if right else "left", end="")
                 for text, style, (_, right) in zip(texts, styles, COLUMNS)]
        for facts, column in ((pair.a, 2), (pair.b, 5)):
            failure = _failure(facts) if facts is not None else ""
            if failure:  # the failure in red, the action after it as the line's style has it
                cells[column].stylize(FAILED, 0, len(failure))
        return cells

    def move_to_first(self) -> bool:
        return self.first is not None and self.move_to_key(str(self.first))

    @property
    def current_pair(self) -> Aligned | None:
        key = self.current_key
        return self.pairs[int(key)] if key is not None else None

    def row_selected(self, key: str) -> None:
        """Open this run's step of the pair, or the original's when only the original has one."""
        pair = self.pairs[int(key)]
        if pair.b is not None:
            self.post_message(StepSelected(pair.b.step, self.runs[1]))
        elif pair.a is not None:
            self.post_message(StepSelected(pair.a.step, self.runs[0]))
