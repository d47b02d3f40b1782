"""One in-process lock per store path: sessions of one path take turns (one DuckDB process cannot
attach the same file twice at once).

A forked child starts with none. A lock held by one of the parent's threads at the moment of
``fork()`` (a reader session, a compaction) belongs to a thread the child does not have: the child's
first open of the store (``Tracing.shutdown`` compacts) waited for it forever (issue 24).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["path_lock"]

_locks: dict[str, threading.RLock] = {}
_guard = threading.Lock()


def path_lock(path: Path) -> threading.RLock:
    key = os.path.realpath(path)
    with _guard:
        return _locks.setdefault(key, threading.RLock())


def _fresh_in_child() -> None:
    global _locks, _guard
    _locks, _guard = {}, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_in_child)
