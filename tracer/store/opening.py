"""Opening a store's DuckDB file: waiting out another process's short hold, and naming what is wrong
with a file that cannot be opened.

Every open of the file (a writer's, a reader's attach) goes through ``retry_locked``: looptrace's
own processes hold the file for moments, so a lock error is waited out up to a bound, and any other
error becomes a ``StoreError`` that says what the file is (not DuckDB, a damaged WAL, a corrupt
file) and that nothing was changed. Kept apart from ``Store`` so the absorbing and the session code
share the same configuration and messages without importing the class.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

from .errors import StoreError
from .wholeness import corrupt_store, is_corruption

__all__ = ["NO_EXTENSIONS", "describe_open_error", "first_line", "is_lock_error", "retry_locked", "sql_str"]

_T = TypeVar("_T")

# Store files are opened with no extension loading: a SQLite or other file given as a store must be
# refused, not opened through a downloaded extension.
NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def _not_duckdb(path: Path) -> bool:
    """A non-empty file without DuckDB's magic bytes (``DUCK`` at offset 8): JSON, text, anything.

    Why look: DuckDB picks a reader by extension, so ``x.json`` fails with "Cannot launch in-memory
    database in read-only mode" where ``x.dat`` fails with "not a valid DuckDB database"."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) > 0 and head[8:12] != b"DUCK"


def describe_open_error(path: Path, exc: BaseException) -> StoreError:
    text = str(exc)
    if _not_duckdb(path):
        return StoreError(
            f"{path}: not a readable looptrace store (not a DuckDB database file). "
            "Point --db at a store written by looptrace, or move this file away; it was not changed."
        )
    if ("not a valid DuckDB" in text or "Invalid Input Error" in text or "Serialization" in text
            or "extension" in text.lower()):
        return StoreError(
            f"{path}: not a readable looptrace store ({text.splitlines()[0]}). "
            "Point --db at a store written by looptrace, or move this file away; it was not changed."
        )
    if is_corruption(exc):
        return corrupt_store(path, exc)
    if "WAL" in text or "replaying" in text.lower():
        return StoreError(
            f"{path}: its write-ahead log ({path}.wal) could not be replayed ({text.splitlines()[0]}). "
            f"Move {path}.wal aside to open the store without the last unflushed writes; nothing was deleted."
        )
    return StoreError(f"{path}: cannot open the store: {text.splitlines()[0]}")


def retry_locked(fn: Callable[[], _T], wait: float, path: Path) -> _T:
    deadline = time.monotonic() + wait
    delay = 0.01
    while True:
        try:
            return fn()
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise describe_open_error(path, exc) from exc
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{path}: held by another process for over {wait:.0f}s ({str(exc).splitlines()[0]}). "
                    "looptrace writers never hold it this long: close the other program (a DuckDB shell?)."
                ) from exc
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def sql_str(path: Path) -> str:
    return str(path).replace("'", "''")
