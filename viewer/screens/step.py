"""One step in full, fetched when opened; ``o`` shows the whole uncut text in ``$PAGER``."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from functools import partial
from typing import ClassVar

from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType

from looptrace.tracer.store import Store

from ..data import full_step_text, load_step
from ..messages import PagerReady, StepLoaded
from ..pager import pager_command, write_pager_file
from ..widgets import KeysFooter, StepView, TitleBar
from .base import ViewerScreen, one_line

__all__ = ["StepScreen"]


class StepScreen(ViewerScreen):
    NAME = "step"
    HELP = (
        "Thought, each tool call with its arguments and observation, the model call(s) and events.\n"
        "Each text is shown up to 64 KB; a yellow notice says how much was cut, and o opens the whole\n"
        "step (escaped the same way) in $PAGER (default less)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "next", "Next step"),
        Binding("p", "previous", "Previous step"),
        Binding("o", "pager", "Open in $PAGER"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store: Store, run_id: str, step: int, steps: Sequence[int] = ()) -> None:
        super().__init__(store)
        self.run_id = run_id
        self.step = step
        self.steps = list(steps) or [step]

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "run", self.run_id[:12], f"step {self.step}", id="step-title")
        yield StepView(id="step-view")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(StepView).focus()
        self.reload()

    def reload(self) -> None:
        self.query_one(TitleBar).set_parts(str(self.store.path), "run", self.run_id[:12], f"step {self.step}")
        self.load("step", "loading the step", partial(load_step, self.store, self.run_id, self.step),
                  partial(StepLoaded, self.run_id, self.step))

    def on_step_loaded(self, message: StepLoaded) -> None:
        if message.step == self.step:
            self.query_one(StepView).show(message.detail)

    def _go(self, delta: int) -> None:
        index = self.steps.index(self.step) if self.step in self.steps else 0
        target = self.steps[max(0, min(len(self.steps) - 1, index + delta))]
        if target != self.step:
            self.step = target
            self.reload()

    def action_next(self) -> None:
        self._go(1)

    def action_previous(self) -> None:
        self._go(-1)

    def action_pager(self) -> None:
        def fetch() -> PagerReady:
            return PagerReady(write_pager_file(full_step_text(self.store, self.run_id, self.step)))

        self.load("pager", "reading the whole step", fetch, lambda message: message)

    def on_pager_ready(self, message: PagerReady) -> None:
        try:
            with self.app.suspend():
                subprocess.run(pager_command(message.path), check=False)
        except (SuspendNotSupported, OSError) as exc:
            self.notify(f"cannot open the pager: {one_line(exc)}", severity="error", markup=False)
        finally:
            message.path.unlink(missing_ok=True)
