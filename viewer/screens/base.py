"""What every viewer screen shares: a store, database work in thread workers, errors shown in place.

Workers call the plain functions of ``viewer.data`` in a thread and post a message back; the
screen's handler updates widgets on the event loop. ``exclusive`` per group means a newer request
(another refresh, another step) supersedes an older one, whose late answer is dropped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import ClassVar, TypeVar

from textual.message import Message
from textual.screen import Screen
from textual.worker import WorkerState, get_current_worker

from looptrace.tracer.store import Store

from ..messages import LoadFailed, RunsAnalysed
from ..safe import safe

__all__ = ["ViewerScreen", "one_line"]

_T = TypeVar("_T")


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class _LoadEnded(Message):
    """Posted after a load's result (or instead of it, when superseded): the load is over."""


class ViewerScreen(Screen[None]):
    HELP: ClassVar[str] = ""  # what the help screen says about this screen, besides its keys
    NAME: ClassVar[str] = ""
    LOADS_ON_MOUNT: ClassVar[bool] = True

    def __init__(self, store: Store, *, refresh_seconds: float | None = None) -> None:
        super().__init__()
        self.store = store
        self.refresh_seconds = refresh_seconds
        self._loaded = not self.LOADS_ON_MOUNT
        self._ended = 0  # loads whose thread finished (counted in the thread) ...
        self._ended_lock = threading.Lock()
        self._seen_ended = 0  # ... and whose messages this screen has handled

    @property
    def busy(self) -> bool:
        """Still loading: nothing shown yet, a load running, or its result not yet handled.

        Tests and ``viewer.capture`` wait on this. A load superseded before it started never runs,
        so loads are tracked by what finished, not by what was asked.
        """
        return self.loading() or not self._loaded or self._ended != self._seen_ended

    def load(self, group: str, what: str, fn: Callable[[], _T], done: Callable[[_T], Message]) -> None:
        """Run ``fn`` in a thread; post ``done(result)`` or ``LoadFailed`` back to this screen."""

        def work() -> None:
            try:
                message: Message = done(fn())
            except Exception as exc:  # noqa: BLE001 - shown in the UI; a worker must not kill the app
                message = LoadFailed(what, one_line(exc))
            if not get_current_worker().is_cancelled:
                self.post_message(message)
            with self._ended_lock:
                self._ended += 1
            self.post_message(_LoadEnded())

        self.run_worker(work, name=what, group=group, exclusive=True, thread=True, exit_on_error=False)

    def loading(self, group: str | None = None) -> bool:
        """Whether a load of ``group`` (None: of any group) is still pending or running. A periodic
        refresh waits for it rather than superseding it: a load slower than the refresh interval (a
        long run, a busy store, a slow machine) would otherwise be dropped every time, never shown."""
        return any(w.node is self and group in (None, w.group)
                   and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in self.app.workers)

    def on__load_ended(self, message: _LoadEnded) -> None:
        self._seen_ended += 1
        self._loaded = True

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(f"{message.what}: {safe(message.error, newlines=False).plain}", severity="error",
                    markup=False, timeout=8)

    def analyse(self, runs: list[tuple[str, str | None, bool]]) -> bool:
        """Analyse, in a worker, those of ``runs`` (id, status, has a diagnosis) that need it; the
        screen gets ``RunsAnalysed`` when done. False if there was nothing to do."""
        analyser = getattr(self.app, "analyser", None)
        ids = analyser.claim(runs) if analyser is not None else []
        if not ids:
            return False
        self.load("analyse", "analysing runs", partial(analyser.analyse, ids), RunsAnalysed)
        return True

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
