"""Stepping through a recorded run like a debugger: next, previous, and jumps to what went wrong.

The step under the cursor is fetched when the cursor lands on it (the newest request wins), so
stepping through a long run reads one step at a time. Divergence needs the original of a replay
or fork: its actions (hashes only) are read once, and ``stepping.first_divergence`` compares them.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.widgets import Static

from looptrace.tracer.store import Store

from ..columns import priority_note
from ..data import RunDetail, load_actions, load_run, load_step, primary_range
from ..messages import ActionsLoaded, RunLoaded, StepHighlighted, StepLoaded, StepSelected
from ..safe import safe
from ..stepping import first_divergence, first_error, first_repeat, step_after
from ..widgets import KeysFooter, StepView, Timeline, TitleBar
from ..widgets.timeline import COMPACT, LAYOUT, MARKS
from .base import ViewerScreen

__all__ = ["ReplayScreen"]


class ReplayScreen(ViewerScreen):
    NAME = "replay"
    HELP = (
        "n / p move one step; f jumps to the first failed tool call, r to the first step repeating an\n"
        "earlier action (same tool and arguments), d to the first step where a replay or fork acts\n"
        "differently from the run it replays (only for runs with replay_of or forked_from); x shows\n"
        "the two runs side by side.\n\n"
        + priority_note(LAYOUT[:COMPACT], MARKS)
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next", "Next"),
        # Short words: every key of this screen fits in the footer at 80 columns (HELP spells them out).
        Binding("p", "previous", "Prev"),
        Binding("f", "first_error", "Error"),
        Binding("r", "first_repeat", "Repeat"),
        Binding("d", "divergence", "Diff"),
        Binding("x", "side_by_side", "Side"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store: Store, run_id: str, start: int | None = None) -> None:
        super().__init__(store)
        self.run_id = run_id
        self.start = start
        self.detail: RunDetail | None = None
        self.original_actions: list[tuple[int, str | None]] | None = None
        self.shown_step: int | None = None
        self.message = Text("")

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "run", self.run_id[:12], "step through")
        yield Static(id="replay-status", classes="status")
        with Horizontal(id="replay-body"):
            yield Timeline(compact=True, id="replay-timeline")
            yield StepView(id="replay-step")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Timeline).focus()
        self.load("run", "loading the run", partial(load_run, self.store, self.run_id),
                  partial(RunLoaded, self.run_id))

    def on_run_loaded(self, message: RunLoaded) -> None:
        self.detail = message.detail
        if self.detail is None:
            self.query_one(StepView).show(None, f"no run {self.run_id} in this store")
            return
        timeline = self.query_one(Timeline)
        timeline.show(self.detail.steps, primary_range(self.detail.diagnoses))
        if self.start is not None:
            timeline.move_to_step(self.start)
        original = self.detail.run.original
        if original:
            self.load("actions", "loading the original run", partial(load_actions, self.store, original),
                      partial(ActionsLoaded, original))
        self._show_status()
        self._fetch_current()

    def on_actions_loaded(self, message: ActionsLoaded) -> None:
        self.original_actions = message.actions
        self._show_status()

    def on_step_highlighted(self, event: StepHighlighted) -> None:
        event.stop()
        self._fetch_current()
        self._show_status()

    def on_step_selected(self, event: StepSelected) -> None:
        event.stop()

    def _fetch_current(self) -> None:
        step = self.query_one(Timeline).current_step
        if step is None or step == self.shown_step:
            return
        self.shown_step = step
        self.load("step", "loading the step", partial(load_step, self.store, self.run_id, step),
                  partial(StepLoaded, self.run_id, step))

    def on_step_loaded(self, message: StepLoaded) -> None:
        if message.step == self.query_one(Timeline).current_step:
            self.query_one(StepView).show(message.detail)

    # -- status ------------------------------------------------------------------------------

    def _targets(self) -> dict[str, int | None]:
        steps = self.detail.steps if self.detail else []
        divergence = None
        if self.original_actions is not None:
            divergence = first_divergence(self.original_actions, [(s.step, s.action_key) for s in steps])
        return {"error": first_error(steps), "repeat": first_repeat(steps), "divergence": divergence}

    def _show_status(self) -> None:
        if self.detail is None:
            return
        current = self.query_one(Timeline).current_step
        targets = self._targets()
        text = Text(f"step {current} of {len(self.detail.steps)}", style="bold")
        for name, value in targets.items():
            if name == "divergence" and not self.detail.run.original:
                continue
            text.append(f"  · first {name}: ", style="dim")
            text.append("none" if value is None else str(value))
        if self.message.plain:
            text.append("  · ").append_text(self.message)
        self.query_one("#replay-status", Static).update(text)

    def _say(self, text: str, style: str = "bold yellow") -> None:
        self.message = safe(text, newlines=False, style=style)
        self._show_status()

    # -- moves -------------------------------------------------------------------------------

    def _go(self, step: int | None, what: str) -> None:
        if step is None:
            self._say(f"no {what} in this run")
            return
        self.message = Text("")
        self.query_one(Timeline).move_to_step(step)
        self._show_status()

    def action_next(self) -> None:
        if self.detail:
            self._go(step_after(self.detail.steps, self.query_one(Timeline).current_step, 1), "step")

    def action_previous(self) -> None:
        if self.detail:
            self._go(step_after(self.detail.steps, self.query_one(Timeline).current_step, -1), "step")

    def action_first_error(self) -> None:
        self._go(self._targets()["error"], "error")

    def action_first_repeat(self) -> None:
        self._go(self._targets()["repeat"], "repeated action")

    def action_divergence(self) -> None:
        if self.detail is None:
            return
        if not self.detail.run.original:
            self._say("no divergence: this run is not a replay or a fork")
            return
        if self.original_actions is None:
            self._say("still loading the original run")
            return
        step = self._targets()["divergence"]
        if step is None:
            self._say("no divergence: same actions as the original")
            return
        last = self.detail.steps[-1].step if self.detail.steps else None
        if last is not None and step > last:
            self.query_one(Timeline).move_to_step(last)
            self._say(f"diverges at step {step}: the original goes on after this run's last step")
            return
        self._go(step, "divergence")
        self._say(f"diverges from the original at step {step}")

    def action_side_by_side(self) -> None:
        from .diff import DiffScreen

        if self.detail is None:
            return
        if not self.detail.run.original:
            self._say("nothing to put side by side: this run is not a replay or a fork")
            return
        self.app.push_screen(DiffScreen(self.store, self.run_id))
