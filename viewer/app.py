"""The viewer app: a thin shell that opens the runs screen and holds the app-wide keys.

Everything else lives in ``screens/`` (one per view), ``widgets/`` (one per file), ``data.py``
(every database read) and ``safe.py`` (the one way trace text reaches a widget).
"""

from __future__ import annotations

import gc
import os
from typing import ClassVar

from textual.app import App
from textual.binding import Binding, BindingType

from looptrace.tracer.export.source import open_source

from .analysing import Analyser
from .messages import OpenChildren, OpenRun
from .screens import HelpScreen, RunScreen, RunsScreen, SearchScreen, SqlScreen, UsageScreen
from .screens.base import ViewerScreen
from .widgets.scrollbars import use_whole_cell_scrollbars

__all__ = ["ViewerApp", "REFRESH_SECONDS"]

REFRESH_SECONDS = 2.0


class ViewerApp(App[None]):
    CSS_PATH = "viewer.tcss"
    TITLE = "looptrace"
    ENABLE_COMMAND_PALETTE = False
    # Below 100 columns the stylesheet gives the run's step list more of the width (viewer.tcss).
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (100, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("colon", "sql", "SQL"),
        # Search and usage work on every screen; the runs list shows them (at 80 columns a run's own keys
        # leave no room for them in its footer).
        Binding("s", "search", "Search", show=False),
        Binding("u", "usage", "Usage", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self, db: str | os.PathLike[str], *, refresh_seconds: float | None = REFRESH_SECONDS
    ) -> None:
        if refresh_seconds is not None and not (refresh_seconds == 0 or 0.1 <= refresh_seconds < float("inf")):
            # a negative or tiny interval redrew in a tight loop (100% CPU); nan never compared true
            raise ValueError(f"refresh_seconds must be 0 (off) or at least 0.1, not {refresh_seconds!r}")
        super().__init__()
        self.store = open_source(db)  # a store, or a Parquet export of one
        self.analyser = Analyser(self.store)  # diagnoses the runs shown that have none
        self.refresh_seconds = refresh_seconds

    def on_mount(self) -> None:
        use_whole_cell_scrollbars()
        # What is alive now (imported modules, Textual's styles, the app) lives as long as the app:
        # out of the cycle collector's sight, its full collections walk only what the screens made.
        # The first one after start-up came while the first run was opening: ~50 ms, now ~10-20 ms.
        gc.freeze()
        self.push_screen(RunsScreen(self.store, refresh_seconds=self.refresh_seconds))

    def on_unmount(self) -> None:
        gc.unfreeze()  # collectable again once the app is gone (tests run many apps in one process)

    def on_open_run(self, message: OpenRun) -> None:
        self.push_screen(RunScreen(self.store, message.run_id, refresh_seconds=self.refresh_seconds))

    def on_open_children(self, message: OpenChildren) -> None:
        self.push_screen(RunsScreen(self.store, parent=message.parent, parent_name=message.parent_name,
                                    refresh_seconds=self.refresh_seconds))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_sql(self) -> None:
        if not isinstance(self.screen, SqlScreen):
            self.push_screen(SqlScreen(self.store))

    def action_search(self) -> None:
        if not isinstance(self.screen, SearchScreen):
            self.push_screen(SearchScreen(self.store))

    def action_usage(self) -> None:
        if not isinstance(self.screen, UsageScreen):
            self.push_screen(UsageScreen(self.store))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The help, SQL, search and usage keys only make sense over a viewer screen (not over the help).
        if action in ("help", "sql", "search", "usage") and not isinstance(self.screen, ViewerScreen):
            return False
        return True
