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
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from itertools import count
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa  # imported where used: reading a store (`looptrace sql`) needs no pyarrow

from ..records.forkgate import ARROW_GATE
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
    "fsync_all",
    "to_arrow",
    "to_segment_arrow",
    "TableData",
]

QUARANTINE = "quarantine"
TRASH = ".absorbed"  # absorbed segments being deleted (left behind only by a kill, or by older versions)


def segments_dir(store_path: str | os.PathLike[str]) -> Path:
    return Path(f"{os.fspath(store_path)}.segments")


@functools.cache
def _arrow_schemas() -> dict[str, pa.Schema]:
    """Every base table's Arrow schema at the current schema version, derived by migrating an empty
    in-memory database once, so segments and the DuckDB file cannot disagree."""
    from .migrations import migrate

    conn = duckdb.connect()
    try:
        migrate(conn)
        tables = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {t: conn.sql(f"SELECT * FROM {t} LIMIT 0").to_arrow_table().schema for t in tables}
    finally:
        conn.close()


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a base table at the current schema version."""
    return _arrow_schemas()[table]


def fsync(path: Path | int) -> None:
    """Flush ``path`` (a file or a folder, or an open descriptor of one) to disk."""
    if isinstance(path, int):
        os.fsync(path)
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_QUIET = {signal.SIGINT, signal.SIGTERM}


def fsync_all(paths: Sequence[Path | int]) -> None:
    """``fsync`` every path, all at once. One after another, each fsync of a new file waited for a
    journal commit of its own (ext4: ~5 ms each, 6-8 per segment, most of a final flush's wall time);
    issued together, the file system commits them in one go (30 -> 10 ms for 6 files and their folder).
    The helper threads block SIGINT/SIGTERM, so those signals still go to the main thread (issue 24)."""
    if len(paths) < 2 or not hasattr(signal, "pthread_sigmask"):
        for p in paths:
            fsync(p)
        return
    errors: list[BaseException] = []

    def one(p: Path | int) -> None:
        try:
            fsync(p)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the writing thread
            errors.append(exc)

    old = signal.pthread_sigmask(signal.SIG_BLOCK, _QUIET)
    try:
        threads = [threading.Thread(target=one, args=(p,), name="looptrace-fsync", daemon=True)
                   for p in paths[1:]]
        for t in threads:
            t.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    one(paths[0])
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


# A table's rows: a sequence of dicts, or a dict of columns (what the span exporter makes).
TableData = Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any]]


def _length(data: TableData) -> int:
    if isinstance(data, Mapping):
        return len(next(iter(data.values()), ()))
    return len(data)


def to_arrow(data: TableData, schema: pa.Schema) -> pa.Table:
    """``data`` as an Arrow table of ``schema``: missing columns are null, unknown ones ignored. An Arrow
    table is taken as it is (the span exporter converts its rows as it prepares them, spans/pending.py)."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    if isinstance(data, Mapping):
        n = _length(data)
        return pa.Table.from_pydict({f.name: data.get(f.name, [None] * n) for f in schema}, schema=schema)
    return pa.Table.from_pylist(list(data), schema=schema)


# Snappy, not zstd: a segment lives only until the next reader absorbs it, and at a final flush's
# size (a few hundred spans, 4-6 tables) zstd's per-column setup was half of writing the Parquet
# files (6.2 vs 3.3 ms CPU per segment; 26 vs 30 kB).
SEGMENT_CODEC = "snappy"

_GATE = ARROW_GATE  # segment writes and conversions run in pyarrow: records/forkgate.py


def to_segment_arrow(table: str, data: TableData) -> Any:
    """``data`` as the Arrow table a segment of ``table`` holds, converted ahead of its write (the span
    exporter converts the rows it holds as it prepares them: spans/pending.py). Inside the fork gate,
    as a write is: the conversion runs in pyarrow too. A table no segment holds is returned as given."""
    if table not in RECORD_TABLES:
        return data
    with _GATE:
        return to_arrow(data, arrow_schema(table))


class SegmentWriter:
    """Writes batches of rows as segments. Thread-safe; one per process is enough.

    Everything a write needs is imported and derived here, in the thread that makes the writer: a
    first import inside a writing thread (pyarrow's, on the span processor's thread) holds that
    module's import lock, and a process that forks meanwhile inherits the lock held by a thread it
    does not have, so the child's first write waited forever (issue 24: 6 of 10 forking programs
    hung). The sequence is an ``itertools.count``, whose ``next`` is atomic: no lock to inherit.
    """

    def __init__(self, store_path: str | os.PathLike[str], *, durable: bool = True) -> None:
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401 - the sink's outcome keys (records/actions.py); as below
        import pyarrow.parquet  # noqa: F401 - see above: never first imported on a writing thread

        # pyarrow's first conversion of Python values imports pandas (if installed: ~0.6 s) holding a
        # lock of its own; done here, not on a writing thread, for the same reason. A fork that had
        # to go ahead while a writing thread held it (the fork gate waits at most FORK_WAIT, and on
        # a loaded machine that import took longer) left both threads of the child waiting on it.
        pa.array([])
        self.dir = segments_dir(store_path)
        self.durable = durable
        self._seq = count()
        _arrow_schemas()

    def converted(self, table: str, data: TableData) -> Any:
        """``data`` as this writer will write it (``to_segment_arrow``): a source that holds rows
        before their write converts them as they come (``Sink.prepare``)."""
        return to_segment_arrow(table, data)

    def write(self, rows: Mapping[str, TableData]) -> str | None:
        """Write one segment holding ``rows`` (table name -> rows, or columns); return its name, or
        None if empty."""
        tables = {t: r for t, r in rows.items() if _length(r)}
        if not tables:
            return None
        seq = next(self._seq)
        with _GATE:
            return self._write(tables, seq)

    def _write(self, tables: dict[str, TableData], seq: int) -> str:
        name = f"{time.time_ns():019d}-{os.getpid()}-{seq:06d}"
        created = self._made_dir()
        tmp, final = self.dir / f".tmp-{name}", self.dir / name
        tmp.mkdir()
        import pyarrow.parquet as pq

        fds: list[int] = []
        try:
            for table, table_rows in tables.items():
                if table not in RECORD_TABLES:
                    raise ValueError(f"unknown table {table!r}")
                data = to_arrow(table_rows, arrow_schema(table))
                pq.write_table(data, tmp / f"{table}.parquet", compression=SEGMENT_CODEC)
            if self.durable:
                for p in (*(tmp / f"{t}.parquet" for t in tables), tmp):
                    fds.append(os.open(p, os.O_RDONLY))
        except BaseException:
            _close(fds)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        # Renamed first, then everything fsynced at once: the files, their folder and the folder the
        # rename changed go to disk in one journal commit, where syncing before the rename and the
        # segments folder after it waited for two (most of a final flush's wall time). Readers may
        # see the segment before its sync returns: that is fine, it is whole (a rename of closed
        # files), and until ``write`` returns nobody was told it is durable. An OS crash in between
        # can leave it torn, a segment never acknowledged, which readers set aside (``quarantine``).
        # The sync goes through descriptors opened before the rename: a reader may absorb and delete
        # the segment meanwhile (then it is durable in the DuckDB file), and a path would be gone.
        try:
            os.rename(tmp, final)
            if self.durable:
                fsync_all([*fds, self.dir, *created])
        except BaseException:
            _withdraw(final)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        finally:
            _close(fds)
        return name

    def _made_dir(self) -> list[Path]:
        """Make the segments folder if it is missing; the folders whose entries changed (to sync)."""
        if self.dir.is_dir():
            return []
        self.dir.mkdir(parents=True, exist_ok=True)
        return [self.dir.parent]


def _close(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def _withdraw(segment: Path) -> None:
    """Take back a segment whose sync failed: hidden at once (a dot-name), then deleted. A reader that
    absorbed it meanwhile made it durable in the DuckDB file; the writer still counts it failed."""
    hidden = segment.with_name(f".tmp-{segment.name}")
    try:
        os.rename(segment, hidden)
    except FileNotFoundError:
        return  # never renamed into place, or absorbed and deleted by a reader already
    except OSError:
        hidden = segment
    shutil.rmtree(hidden, ignore_errors=True)


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
