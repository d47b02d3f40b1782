"""The runs table: filter, sort, page, open a run or its children; refreshes itself while shown."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from looptrace.tracer.cli.plural import count
from looptrace.tracer.store import Store

from ..columns import priority_note
from ..data import RUNS_PAGE, SORTS, RunPage, RunRow, list_runs
from ..filters import RunFilter, parse_filter
from ..messages import OpenChildren, OpenRun, RunsAnalysed, RunsLoaded
from ..safe import safe
from ..widgets import KeysFooter, RunsTable, TitleBar
from ..widgets.runs_table import RUN_COLUMNS
from .base import ViewerScreen

__all__ = ["RunsScreen"]

SORT_ORDER = tuple(SORTS)
FILTER_DEBOUNCE = 0.3
FILTER_PLACEHOLDER = "filter: status:stagnated label:cap_hit agent:demo model:scripted words in the task"


class RunsScreen(ViewerScreen):
    NAME = "runs"
    HELP = (
        "Filter with the box at the top (/), e.g.\n"
        "    status:stagnated label:cap_hit agent:demo model:scripted deploy\n"
        "status: and label: match exactly, agent: and model: match part of the name, other words\n"
        "must appear in the task. Repeat a key to accept several values. Without a filter only\n"
        "top-level runs are listed; sub-agents, replays and forks are counted in the 'sub' column and\n"
        "listed with c (escape comes back). With a filter, matching child runs are listed too, marked ↳.\n\n"
        + priority_note(RUN_COLUMNS) + " The column sorted by is kept after status and diagnosis."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "focus_filter", "Filter"),
        Binding("o", "sort", "Sort"),
        Binding("O", "reverse", "Reverse"),
        Binding("c", "children", "Children"),
        Binding("s", "app.search", "Search"),
        Binding("u", "app.usage", "Usage"),
        # Told in the status line when more runs match (the footer has no room for it at 80 columns).
        Binding("m", "more", "More", show=False),
        Binding("escape", "escape", "Back", show=False),
    ]
    # The table has the keys from the first frame. Textual focuses a screen's first focusable widget as
    # it composes (the filter box); a focus() in on_mount lands only later, and a `q` typed in between,
    # by a user quick on the keys or a loaded machine, went into the filter instead of quitting.
    AUTO_FOCUS = "#runs"

    def __init__(
        self, store: Store, *, parent: str | None = None, parent_name: str = "",
        refresh_seconds: float | None = 2.0,
    ) -> None:
        super().__init__(store, refresh_seconds=refresh_seconds)
        self.parent_run = parent
        self.parent_name = parent_name
        self.filter = RunFilter()
        self.sort = "started"
        self.descending = True
        self.limit = RUNS_PAGE
        self.page: RunPage | None = None
        self._debounce: Timer | None = None

    def compose(self) -> ComposeResult:
        parts = [str(self.store.path), "runs"]
        if self.parent_run:
            parts.append(f"children of {self.parent_name} {self.parent_run[:8]}")
        yield TitleBar(*parts)
        yield Input(placeholder=FILTER_PLACEHOLDER, id="filter")
        yield RunsTable(id="runs")
        yield Static(id="runs-status", classes="status")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(RunsTable).mark_sort(self.sort, self.descending)
        self.reload()
        if self.refresh_seconds:
            self.set_interval(self.refresh_seconds, self._tick)

    def on_screen_resume(self) -> None:
        if self.page is not None:
            self.reload()

    def _tick(self) -> None:
        if self.is_current and not self.loading("runs"):
            self.reload()

    def reload(self) -> None:
        fn = partial(list_runs, self.store, self.filter, sort=self.sort, descending=self.descending,
                     parent=self.parent_run, limit=self.limit)
        self.load("runs", "loading runs", fn, RunsLoaded)

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        self.page = message.page
        self.query_one(RunsTable).show(message.page.rows)
        self._show_status()
        self.analyse([(r.run_id, r.status, r.label is not None) for r in message.page.rows])

    def on_runs_analysed(self, message: RunsAnalysed) -> None:
        if message.diagnosed:
            self.reload()

    def _show_status(self) -> None:
        page = self.page
        text = Text()
        if page is not None:
            shown = len(page.rows)
            text.append(f"{count(page.total_runs, 'run', thousands=True)}, {shown:,} shown")
            if page.more:
                text.append(f"  · more match: m shows {RUNS_PAGE} more, or narrow the filter",
                            style="bold yellow")
        text.append(f"  · sort: {self.sort} {'▼' if self.descending else '▲'}", style="dim")
        if self.filter.active:
            text.append("  · filtered (child runs included)", style="dim")
        for error in self.filter.errors:
            text.append("  · ").append_text(safe(error, newlines=False, style="bold red"))
        self.query_one("#runs-status", Static).update(text)

    # -- filter ------------------------------------------------------------------------------

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(FILTER_DEBOUNCE, partial(self._apply_filter, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._apply_filter(event.value)
        self.query_one(RunsTable).focus()

    def _apply_filter(self, text: str) -> None:
        flt = parse_filter(text)
        if flt != self.filter:
            self.filter = flt
            self.limit = RUNS_PAGE
            self.reload()
        self._show_status()

    def action_focus_filter(self) -> None:
        self.query_one("#filter", Input).focus()

    def action_escape(self) -> None:
        if self.query_one("#filter", Input).has_focus:
            self.query_one(RunsTable).focus()
        else:
            self.action_back()

    # -- table -------------------------------------------------------------------------------

    def action_sort(self) -> None:
        self.sort = SORT_ORDER[(SORT_ORDER.index(self.sort) + 1) % len(SORT_ORDER)]
        self._resort()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self._resort()

    def _resort(self) -> None:
        self.query_one(RunsTable).mark_sort(self.sort, self.descending)
        self._show_status()
        self.reload()

    def action_more(self) -> None:
        if self.page is not None and self.page.more:
            self.limit += RUNS_PAGE
            self.reload()

    def _selected(self) -> RunRow | None:
        key = self.query_one(RunsTable).current_key
        if key is None or self.page is None:
            return None
        return next((r for r in self.page.rows if r.run_id == key), None)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        row = self._selected()
        if row is not None:
            self.post_message(OpenRun(row.run_id))

    def action_children(self) -> None:
        row = self._selected()
        if row is None:
            return
        if not row.children:
            self.notify("this run has no sub-agents, replays or forks")
            return
        self.post_message(OpenChildren(row.run_id, row.agent or ""))
