"""One run: summary, step timeline, diagnosis, context and cost charts; refreshes while it runs."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal

from looptrace.tracer.store import Store

from ..columns import priority_note
from ..data import RunDetail, load_run, primary_range
from ..messages import OpenChildren, RunLoaded, RunsAnalysed, StepSelected
from ..safe import safe
from ..widgets import DiagnosisPanel, KeysFooter, RunCharts, RunSummary, Timeline, TitleBar
from ..widgets.timeline import LAYOUT, MARKS
from .base import ViewerScreen

__all__ = ["RunScreen"]

# A run that may still gain steps: ``running`` (a preview of a trace `looptrace collect` holds open) or
# ``incomplete`` (no end recorded: still traced, or its process died).
_STILL_GOING = ("running", "incomplete")


class RunScreen(ViewerScreen):
    NAME = "run"
    HELP = (
        "One line per step: tool, arguments, observation size, tokens, context size, cost, errors.\n"
        "Steps named by the primary diagnosis are marked ◆ with a yellow step number.\n"
        "The run refreshes on its own while it is still running (status running or incomplete).\n\n"
        + priority_note(LAYOUT, MARKS)
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("e", "evidence", "Evidence"),
        Binding("t", "step_through", "Step through"),
        Binding("c", "children", "Children"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store: Store, run_id: str, *, refresh_seconds: float | None = 2.0) -> None:
        super().__init__(store, refresh_seconds=refresh_seconds)
        self.run_id = run_id
        self.detail: RunDetail | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "run", self.run_id[:12])
        yield RunSummary(id="run-summary")
        with Horizontal(id="run-body"):
            yield Timeline(id="timeline")
            yield DiagnosisPanel(id="diagnosis")
        yield RunCharts(id="charts")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Timeline).focus()
        self.reload()
        if self.refresh_seconds:
            self.set_interval(self.refresh_seconds, self._tick)

    def _tick(self) -> None:
        # A finished run does not change (until it is analysed again); a running one gains steps.
        if self.is_current and not self.loading("run") and \
                (self.detail is None or self.detail.run.status in _STILL_GOING):
            self.reload()

    def reload(self) -> None:
        self.load("run", "loading the run", partial(load_run, self.store, self.run_id),
                  partial(RunLoaded, self.run_id))

    def on_run_loaded(self, message: RunLoaded) -> None:
        detail = message.detail
        if detail is None:
            self.query_one(RunSummary).update(safe(f"no run {self.run_id} in this store"))
            return
        self.detail = detail
        self.query_one(RunSummary).show(detail)
        self.query_one(Timeline).show(detail.steps, primary_range(detail.diagnoses))
        analysing = not detail.diagnoses and self.analyse([(self.run_id, detail.run.status, False)])
        self.query_one(DiagnosisPanel).show(detail.diagnoses, analysing=analysing)
        self.query_one(RunCharts).show(detail.steps)

    def on_runs_analysed(self, message: RunsAnalysed) -> None:
        self.reload()

    def action_evidence(self) -> None:
        if self.detail is None:
            return
        primary = self.detail.primary
        if primary is None or primary.first_step is None:
            self.notify("no diagnosis names a step: run `looptrace analyze`", markup=False)
            return
        timeline = self.query_one(Timeline)
        timeline.move_to_step(primary.first_step)
        timeline.focus()

    def on_step_selected(self, event: StepSelected) -> None:
        event.stop()
        self.action_open_step()

    def action_open_step(self) -> None:
        from .step import StepScreen

        step = self.query_one(Timeline).current_step
        if step is not None and self.detail is not None:
            steps = [s.step for s in self.detail.steps]
            self.app.push_screen(StepScreen(self.store, self.run_id, step, steps))

    def action_step_through(self) -> None:
        from .replay import ReplayScreen

        if self.detail is not None:
            self.app.push_screen(ReplayScreen(self.store, self.run_id, self.query_one(Timeline).current_step))

    def action_children(self) -> None:
        if self.detail is None or not self.detail.children:
            self.notify("this run has no sub-agents, replays or forks")
            return
        self.post_message(OpenChildren(self.run_id, self.detail.run.agent or ""))
