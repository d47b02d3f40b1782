"""Progress for long commands: a rich progress bar on a terminal once the work passes a second.

Quiet in pipes, files and CI (``CI`` set): a log or a script gets only the command's result. Work
that ends within ``AFTER`` seconds shows nothing either, so quick runs do not flicker. A timer
thread starts the bar, so work that reports no steps (one long call) still gets a spinner; rich
redraws it from its own thread, and the bar is removed when the work ends.
"""

from __future__ import annotations

import os
import sys
import threading
from types import TracebackType
from typing import Any, TextIO

__all__ = ["Progress", "AFTER"]

AFTER = float(os.environ.get("LOOPTRACE_PROGRESS_AFTER", "1.0"))  # seconds before a bar appears


class Progress:
    """``with Progress("exporting", total=6) as p: ... p.advance()``; ``total=None`` is a spinner."""

    def __init__(self, description: str, total: int | None = None, *, out: TextIO | None = None,
                 after: float | None = None) -> None:
        self.description = description
        self.total = total
        self.out = out if out is not None else sys.stderr
        self.after = AFTER if after is None else after
        self.done = 0
        self.enabled = bool(getattr(self.out, "isatty", lambda: False)()) and not os.environ.get("CI")
        self._lock = threading.Lock()
        self._bar: Any = None
        self._task: Any = None
        self._timer: threading.Timer | None = None
        self._closed = False

    def __enter__(self) -> Progress:
        if self.enabled and self.after <= 0:
            self._show()  # at once (LOOPTRACE_PROGRESS_AFTER=0): no race with work that ends quickly
        elif self.enabled:
            self._timer = threading.Timer(self.after, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _show(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        with self._lock:
            if self._closed:
                return
            columns = [SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TimeElapsedColumn()] if self.total else [SpinnerColumn(), TextColumn("{task.description}"),
                                                                TimeElapsedColumn()]
            self._bar = Bar(*columns, console=Console(file=self.out), transient=True)
            self._task = self._bar.add_task(self.description, total=self.total, completed=self.done)
            self._bar.start()

    def advance(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            if self._bar is not None:
                self._bar.update(self._task, completed=self.done)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._bar is not None:
                self._bar.stop()
