"""What every viewer screen shares: a store, database work in thread workers, errors shown in place.

Workers call the plain functions of ``viewer.data`` in a thread and post a message back; the
screen's handler updates widgets on the event loop. ``exclusive`` per group means a newer request
(another refresh, another step) supersedes an older one, whose late answer is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

from textual.message import Message
from textual.screen import Screen
from textual.worker import get_current_worker

from tracer.store import Store

from ..messages import LoadFailed
from ..safe import safe

__all__ = ["ViewerScreen", "one_line"]

_T = TypeVar("_T")


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


class ViewerScreen(Screen[None]):
    HELP: ClassVar[str] = ""  # what the help screen says about this screen, besides its keys
    NAME: ClassVar[str] = ""

    def __init__(self, store: Store, *, refresh_seconds: float | None = None) -> None:
        super().__init__()
        self.store = store
        self.refresh_seconds = refresh_seconds

    def load(self, group: str, what: str, fn: Callable[[], _T], done: Callable[[_T], Message]) -> None:
        """Run ``fn`` in a thread; post ``done(result)`` or ``LoadFailed`` back to this screen."""

        def work() -> None:
            try:
                message: Message = done(fn())
            except Exception as exc:  # noqa: BLE001 - shown in the UI; a worker must not kill the app
                message = LoadFailed(what, one_line(exc))
            if not get_current_worker().is_cancelled:
                self.post_message(message)

        self.run_worker(work, name=what, group=group, exclusive=True, thread=True, exit_on_error=False)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.notify(f"{message.what}: {safe(message.error, newlines=False).plain}", severity="error",
                    markup=False, timeout=8)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
