"""Segment files: how many processes write one store without holding its lock.

DuckDB lets one process open a database file for writing, and while it does no other process can
open it at all. Agents run many at a time and users watch them live, so writers never open the
DuckDB file: each export batch becomes a *segment*, a folder of Parquet files (one per table),
written under a temporary name, fsynced, then renamed into ``<store>.segments/``. A rename is atomic,
so a reader sees a whole batch or none of it, and a writer killed mid-batch leaves only a
``.tmp-`` folder that nobody reads. The DuckDB file absorbs segments whenever a reader or a
compaction opens it for a moment (see ``store.py``).
"""

from __future__ import annotations

import functools
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from itertools import count
from pathlib import Path
from threading import Lock
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: reading a store (`looptrace sql`) needs no pyarrow

from .tables import RECORD_TABLES

__all__ = [
    "segments_dir",
    "SegmentWriter",
    "list_segments",
    "segment_files",
    "quarantine",
    "remove_segments",
    "empty_trash",
    "arrow_schema",
    "fsync",
    "to_arrow",
    "TableData",
]

QUARANTINE = "quarantine"
TRASH = ".absorbed"  # absorbed segments being deleted (left behind only by a kill, or by older versions)


def segments_dir(store_path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(store_path)}.segments")


@functools.cache
def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a base table at the current schema version, derived by migrating an
    empty in-memory database, so segments and the DuckDB file cannot disagree."""
    from .migrations import migrate

    conn = duckdb.connect()
    try:
        migrate(conn)
        return conn.sql(f"SELECT * FROM {table} LIMIT 0").to_arrow_table().schema
    finally:
        conn.close()


def fsync(path: Path) -> None:
    """Flush ``path`` (a file or a folder) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# A table's rows: a sequence of dicts, or a dict of columns (what the span exporter makes).
TableData = Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]]


def _length(data: TableData) -> int:
    if isinstance(data, Mapping):
        return len(next(iter(data.values()), ()))
    return len(data)


def to_arrow(data: TableData, schema: pa.Schema) -> pa.Table:
    """``data`` as an Arrow table of ``schema``: missing columns are null, unknown ones ignored."""
    import pyarrow as pa

    if isinstance(data, Mapping):
        n = _length(data)
        return pa.Table.from_pydict({f.name: data.get(f.name, [None] * n) for f in schema}, schema=schema)
    return pa.Table.from_pylist(list(data), schema=schema)


class SegmentWriter:
    """Writes batches of rows as segments. Thread-safe; one per process is enough."""

    def __init__(self, store_path: str | os.PathLike[str], *, durable: bool = True) -> None:
        self.dir = segments_dir(store_path)
        self.durable = durable
        self._seq = count()
        self._lock = Lock()

    def write(self, rows: Mapping[str, TableData]) -> str | None:
        """Write one segment holding ``rows`` (table name -> rows, or columns); return its name, or
        None if empty."""
        tables = {t: r for t, r in rows.items() if _length(r)}
        if not tables:
            return None
        with self._lock:
            seq = next(self._seq)
        name = f"{time.time_ns():019d}-{os.getpid()}-{seq:06d}"
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".tmp-{name}"
        tmp.mkdir()
        import pyarrow.parquet as pq

        try:
            for table, table_rows in tables.items():
                if table not in RECORD_TABLES:
                    raise ValueError(f"unknown table {table!r}")
                data = to_arrow(table_rows, arrow_schema(table))
                target = tmp / f"{table}.parquet"
                pq.write_table(data, target, compression="zstd")
                if self.durable:
                    fsync(target)
            if self.durable:
                fsync(tmp)
            os.rename(tmp, self.dir / name)
            if self.durable:
                fsync(self.dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return name


def list_segments(directory: Path) -> list[str]:
    """Names of the complete segments in ``directory``, oldest first."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(e for e in entries if not e.startswith(".") and e != QUARANTINE)


def segment_files(directory: Path, names: Sequence[str], table: str) -> list[str]:
    files = (directory / n / f"{table}.parquet" for n in names)
    return [str(f) for f in files if f.exists()]


def remove_segments(directory: Path, names: Sequence[str]) -> None:
    """Delete absorbed segments now, in the caller's thread; also whatever earlier runs left in ``.absorbed/``.

    Called only after the absorbing transaction committed, so a kill anywhere in here loses nothing:
    a segment still in place is recorded in ``absorbed_segments`` and is deleted, never absorbed
    again, by the next compaction. Each segment is first renamed into ``.absorbed/`` (one atomic
    metadata operation; readers skip dot-names), so a reader never sees one half-deleted, then its
    files are removed. Deletion used to run in a daemon thread that died with a short-lived process
    (``looptrace compact``), and an early return skipped the trash when nothing was pending: two
    compactions left all 403 absorbed segments on disk.
    """
    trash = directory / TRASH
    try:
        trash.mkdir(exist_ok=True)
    except FileNotFoundError:
        return  # no segments folder at all
    except OSError:
        for n in names:
            shutil.rmtree(directory / n, ignore_errors=True)
        return
    for n in names:
        try:
            os.rename(directory / n, trash / n)
        except FileNotFoundError:
            pass  # already gone
        except OSError:
            shutil.rmtree(directory / n, ignore_errors=True)
    empty_trash(directory)


def empty_trash(directory: Path) -> None:
    """Delete what ``.absorbed/`` holds (never the folder itself: a rename into it may be under way)."""
    folder = directory / TRASH
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for e in entries:
        shutil.rmtree(folder / e, ignore_errors=True)


def quarantine(directory: Path, name: str) -> Path:
    """Move an unreadable segment aside, never deleting it, so a user can inspect or report it."""
    target = directory / QUARANTINE
    target.mkdir(exist_ok=True)
    dest = target / name
    os.rename(directory / name, dest)
    return dest
