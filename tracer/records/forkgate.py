"""No ``fork()`` while another thread is inside pyarrow.

pyarrow's allocator, converters, codecs and compute kernels (RE2) take locks of their own; a child
forked while another thread of the parent held one inherits it held by a thread it does not have, and
its own first call into pyarrow waits for ever (issue 24). Every piece of looptrace's tracing path that
calls pyarrow on a background thread (a segment's conversion and write, the sink's outcome keys over a
column) runs inside ``ARROW_GATE``.
"""

from __future__ import annotations

import os
import threading

__all__ = ["ARROW_GATE", "FORK_WAIT"]

FORK_WAIT = 10.0  # seconds a fork() waits for pyarrow work under way in other threads


class _ForkGate:
    """No ``fork()`` in the middle of a segment write. A write runs in pyarrow (its allocator, its
    converters, codecs), whose locks a forked child inherits in whatever state another thread left
    them: a child forked while the parent's span processor was writing hung in its own first write
    (issue 24). So writes count themselves in and out, and ``os.register_at_fork``'s *before* hook
    waits for them to finish (at most ``FORK_WAIT`` s: a fork is never refused) and holds new ones
    back until the fork is done; the child starts with a fresh gate."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active = 0

    def __enter__(self) -> None:
        with self._cond:
            self._active += 1

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._active -= 1
            if not self._active:
                self._cond.notify_all()

    def before_fork(self) -> None:
        self._cond.acquire()
        self._cond.wait_for(lambda: not self._active, FORK_WAIT)

    def after_fork_in_parent(self) -> None:
        self._cond.release()

    def after_fork_in_child(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._active = 0


ARROW_GATE = _ForkGate()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=ARROW_GATE.before_fork, after_in_parent=ARROW_GATE.after_fork_in_parent,
                        after_in_child=ARROW_GATE.after_fork_in_child)
