"""Search every run's thoughts, arguments and observations; Enter on a hit opens its step.

The search runs in a thread worker (``viewer.search``), one page of hits at a time; a newer search
supersedes an older one still running. ``ctrl+t`` switches between substring and regular expression.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Input, Static

from looptrace.tracer.store import Store

from ..columns import Column, priority_note
from ..messages import LoadFailed, SearchDone
from ..safe import safe
from ..search import SEARCH_LIMIT, SearchHit, search
from ..widgets import KeysFooter, SyncedTable, TitleBar
from .base import ViewerScreen
from .step import StepScreen

__all__ = ["SearchScreen", "HIT_COLUMNS"]

# The text comes last: it takes the room the others leave, cut with … (viewer.columns).
HIT_COLUMNS = (Column("run", "run", 0), Column("agent", "agent", 2, least=12), Column("step", "step", 1, right=True),
               Column("field", "field", 3), Column("text", "text", 4, least=16))


class SearchScreen(ViewerScreen):
    NAME = "search"
    LOADS_ON_MOUNT = False
    HELP = (
        "Type text and press Enter: every run's thoughts, tool arguments and observations are searched,\n"
        f"case-insensitively, first {SEARCH_LIMIT} hits (ordered by run and step). ctrl+t switches to a\n"
        "regular expression (RE2). Enter on a hit opens its step; escape goes back.\n\n"
        + priority_note(HIT_COLUMNS)
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+t", "toggle_regex", "Regex on/off", priority=True),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.regex = False
        self.hits: list[SearchHit] = []

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "search")
        yield Input(placeholder="search thoughts, arguments, observations (Enter)", id="search-input")
        yield Static(Text("substring, case-insensitive", style="dim"), id="search-status", classes="status")
        yield SyncedTable(id="search-hits")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(SyncedTable).show_fitted(HIT_COLUMNS, [])
        self.query_one(Input).focus()

    def action_toggle_regex(self) -> None:
        self.regex = not self.regex
        self._run(self.query_one(Input).value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._run(event.value)

    def _run(self, needle: str) -> None:
        mode = "regular expression" if self.regex else "substring, case-insensitive"
        if not needle:
            self._status(Text(mode, style="dim"))
            return
        self._status(Text(f"searching ({mode})…", style="dim"))
        self.load("search", "search", partial(search, self.store, needle, regex=self.regex), SearchDone)

    def on_search_done(self, message: SearchDone) -> None:
        page = message.page
        self.hits = page.hits
        table = self.query_one(SyncedTable)
        table.show_fitted(HIT_COLUMNS, [
            (str(i), [safe(h.run_id[:12]), safe(h.agent, newlines=False, width=40), Text(str(h.step)),
                      Text(h.field), safe(" ".join(h.snippet.split()), newlines=False, width=120)])
            for i, h in enumerate(page.hits)])
        n = len(page.hits)
        text = Text(f"{n:,} hit{'s' if n != 1 else ''}", style="bold")
        if page.more:
            text.append(f" (first {SEARCH_LIMIT}; more exist: narrow the search)", style="bold yellow")
        text.append(f" in {page.seconds:.3f} s · {'regex' if page.regex else 'substring'}", style="dim")
        self._status(text)
        if n:
            table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is None:
            return
        hit = self.hits[int(key)]
        steps = sorted({h.step for h in self.hits if h.run_id == hit.run_id})
        self.app.push_screen(StepScreen(self.store, hit.run_id, hit.step, steps))

    def on_load_failed(self, message: LoadFailed) -> None:
        self.query_one(SyncedTable).show_fitted(HIT_COLUMNS, [])
        self._status(Text("error: ", style="bold red").append_text(safe(message.error, newlines=False)))

    def _status(self, text: Text) -> None:
        self.query_one("#search-status", Static).update(text)
