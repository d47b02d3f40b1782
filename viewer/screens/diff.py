"""A replay or fork side by side with the run it comes from, steps aligned as ``looptrace diff`` does."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from looptrace.tracer.store import Store

from ..columns import priority_note
from ..data import RunPair, load_diff
from ..messages import DiffLoaded, StepSelected
from ..safe import safe_plain
from ..widgets import DiffTable, KeysFooter, TitleBar
from ..widgets.diff_table import LAYOUT, NAMES
from .base import ViewerScreen

__all__ = ["DiffScreen"]


class DiffScreen(ViewerScreen):
    NAME = "diff"
    HELP = (
        "The run it replays or forks on the left, this run on the right, one line per pair of steps\n"
        "aligned by a longest common subsequence of their actions (tools and arguments). = marks the\n"
        "same action, ≠ a different one or a step only one run has; where the runs part, the steps that\n"
        "stand in each other's place share a line. ✗ marks a failed step, with its error: a refused model\n"
        "call made no decision, so it is never alike an answer. d jumps to the first divergence,\n"
        "enter opens this run's step (or the original's, where this run has none), o the original's.\n\n"
        + priority_note(LAYOUT, NAMES)
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "divergence", "First divergence"),
        Binding("o", "original", "Original's step"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store: Store, run_id: str) -> None:
        super().__init__(store)
        self.run_id = run_id
        self.pair: RunPair | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "run", self.run_id[:12], "side by side")
        yield Static(id="diff-status", classes="status")
        yield DiffTable(id="diff-table")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(DiffTable).focus()
        self.load("diff", "loading both runs", partial(load_diff, self.store, self.run_id),
                  partial(DiffLoaded, self.run_id))

    def on_diff_loaded(self, message: DiffLoaded) -> None:
        self.pair = pair = message.pair
        status = self.query_one("#diff-status", Static)
        if pair is None:
            status.update(Text("this run is not a replay or a fork: there is nothing to put beside it"))
            return
        diff = pair.diff
        table = self.query_one(DiffTable)
        table.show((pair.original, pair.derived), diff.pairs, diff.first_divergence)
        a = sum(p.a is not None for p in diff.pairs)
        b = sum(p.b is not None for p in diff.pairs)
        text = Text(f"{pair.kind} of {safe_plain(pair.original[:12], newlines=False)}", style="bold")
        text.append(f"  · steps: {a} beside {b}, {diff.common} alike")
        if diff.first_divergence is None:
            text.append("  · same actions throughout")
        else:
            # Where each run stands at the divergence: its next step from there (a pair may hold a
            # step of one run only).
            rest = diff.pairs[diff.first_divergence:]
            a_step = next((p.a.step for p in rest if p.a is not None), None)
            b_step = next((p.b.step for p in rest if p.b is not None), None)
            text.append("  · first divergence: ", style="dim")
            text.append(f"original step {a_step if a_step is not None else '(ended)'}, "
                        f"this run's step {b_step if b_step is not None else '(ended)'}", style="bold yellow")
            table.move_to_first()
        if pair.more:
            text.append("  · only the first steps are compared (a run is longer)", style="yellow")
        status.update(text)

    def action_divergence(self) -> None:
        if self.pair is not None and not self.query_one(DiffTable).move_to_first():
            self.notify("no divergence: same actions as the original", markup=False)

    def action_original(self) -> None:
        """Open the original's step of the line (a paired line's enter opens this run's)."""
        pair = self.query_one(DiffTable).current_pair
        if self.pair is not None and pair is not None and pair.a is not None:
            self.post_message(StepSelected(pair.a.step, self.pair.original))

    def on_step_selected(self, event: StepSelected) -> None:
        from .step import StepScreen

        event.stop()
        if self.pair is None or event.run_id is None:
            return
        side = [p.b if event.run_id == self.pair.derived else p.a for p in self.pair.diff.pairs]
        steps = [f.step for f in side if f is not None]
        self.app.push_screen(StepScreen(self.store, event.run_id, event.step, steps))
