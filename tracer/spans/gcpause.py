"""The cyclic garbage collector paused while the exporter turns a batch of spans into a segment.

Mapping 8,192 spans allocates hundreds of thousands of lists, tuples and dicts, none of them in a
reference cycle (reference counting frees them all), and every 700 allocations start a collection
that traverses the young objects; the older generations' collections it triggers traverse the whole
heap: the spans still queued and the agent's own objects. In the store_write bench that was a third
of the exporter's CPU (gc on 1.60-2.01 s, off 1.02-1.15 s for 100,001 spans, at load 3-6). A pause
lasts one export (tens of milliseconds); whatever cyclic garbage the agent made meanwhile is
collected by the first collection after it.

Nested and concurrent pauses (several exporters, several threads) count in and out: the collector
is enabled again by the last one out, and only if it was enabled when the first came in.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()


def _after_fork_in_child() -> None:
    """A child forked during a pause has no thread to end it: it starts with none, collector as before."""
    global _lock, _depth
    _lock = threading.Lock()
    if _depth and _was_enabled:
        gc.enable()
    _depth = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
