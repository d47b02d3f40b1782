"""Fork hooks that do not keep their objects alive: ``os.register_at_fork`` hooks cannot be removed,
so each one holds only a weak reference to the method it calls in the child."""

from __future__ import annotations

import os
import signal
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["at_fork", "around_fork_threads", "signals_to_main_thread", "QUIET_SIGNALS"]

QUIET_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
_saved: list[set[signal.Signals]] = []


@contextmanager
def signals_to_main_thread() -> Iterator[None]:
    """Threads started inside block SIGTERM and SIGINT, so the kernel hands those process-wide signals
    to the main thread: Python runs its handlers there, and only the thread that takes a signal has its
    blocking call interrupted. A pool worker's SIGTERM taken by a tracer thread left its main thread
    waiting on the task queue's lock, and ``Pool.terminate`` waited for it forever (issue 24)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, QUIET_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _quiet() -> None:
    _saved.append(signal.pthread_sigmask(signal.SIG_BLOCK, QUIET_SIGNALS))


def _restore() -> None:
    if _saved:
        signal.pthread_sigmask(signal.SIG_SETMASK, _saved.pop())


def around_fork_threads(make: Callable[[], None]) -> None:
    """Call ``make`` (which starts threads, and registers fork hooks that start them again in a child)
    so that those threads block the quiet signals, here and in every forked child."""
    if not hasattr(signal, "pthread_sigmask") or not hasattr(os, "register_at_fork"):
        make()
        return
    os.register_at_fork(after_in_child=_quiet)  # child hooks run in registration order: before make's
    with signals_to_main_thread():
        make()
    os.register_at_fork(after_in_child=_restore)


def at_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in every forked child while its object is alive."""
    if not hasattr(os, "register_at_fork"):
        return
    weak = weakref.WeakMethod(method)  # type: ignore[arg-type]

    def hook() -> None:
        bound = weak()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=hook)
