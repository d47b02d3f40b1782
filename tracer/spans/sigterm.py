"""SIGTERM: ``SystemExit`` in the process that made ``Tracing``, the default action in its
``multiprocessing`` children.

In the agent's own process SIGTERM becomes ``SystemExit``, so runs end ``interrupted`` and buffered
spans are flushed. A ``multiprocessing`` child is another matter: SIGTERM is how ``Process.terminate``
and ``Pool.terminate`` end it, and the parent then joins it. A Python-level handler only sets a flag
that the main thread reads between bytecodes. A pool worker's main thread waiting for a task in
``sem_wait`` (the queue's read lock, which ``Pool.terminate`` holds for good) goes back to sleep when
the signal was taken by another thread, or when it arrived just before the wait began. The OpenBLAS
thread that ``import numpy`` starts (pyarrow imports numpy) does not block SIGTERM. So the worker
never ended, and ``Pool.terminate`` joined it forever (issue 24: ``pool:forkserver``, 5 hangs in 34
runs under load). So a child gets SIGTERM's default action back: the kernel ends the process
whichever thread takes the signal, as ``multiprocessing`` expects. Its finished runs are already
stored, because a child process exports each run as it ends (``BackpressureSpanProcessor``). A run
cut short by ``terminate()`` keeps only its start record (``incomplete``).

A user's own SIGTERM handler is never touched, here or in a child.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import signal
import threading
from types import FrameType

__all__ = ["exit_on_sigterm", "sigterm_is_ours"]


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


class _Owner:
    """The object multiprocessing's after-fork registry holds weakly: this module keeps it alive."""


_OWNER = _Owner()
_hooked = False


def sigterm_is_ours() -> bool:
    return signal.getsignal(signal.SIGTERM) is _on_sigterm


def _in_multiprocessing_child() -> bool:
    """A started child, or a spawn or forkserver child importing the parent's main module before it
    starts (``_inheriting`` is multiprocessing's own mark for that, which its ``spawn`` checks too); a
    forkserver process preloading that module is marked the same way."""
    current = multiprocessing.current_process()
    return multiprocessing.parent_process() is not None or bool(getattr(current, "_inheriting", False))


def _default_in_child(_owner: _Owner) -> None:
    """Run by a ``multiprocessing`` child of the fork method as it starts (in its main thread, before
    its target), which inherited the handler from its parent. (Spawn children do not run these hooks;
    they never install the handler: see ``_in_multiprocessing_child``.)"""
    try:
        if sigterm_is_ours():
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):  # not the main interpreter
        pass


def exit_on_sigterm() -> None:
    """Turn SIGTERM into ``SystemExit``. Only when nobody else handles SIGTERM, only from the main
    thread, and never in a ``multiprocessing`` child (started, or importing the main module)."""
    global _hooked
    if threading.current_thread() is not threading.main_thread():
        return
    if _in_multiprocessing_child():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError):  # not the main interpreter, or no signals here
        return
    if not _hooked:  # a forked child inherits both the handler and this registration
        multiprocessing.util.register_after_fork(_OWNER, _default_in_child)
        _hooked = True
