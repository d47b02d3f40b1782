"""Absorbing segments: the pending Parquet segments copied into the DuckDB file in one transaction.

A writer (``Store.writer``, ``Store.compact``) holds the file for this and nothing more. The
segments absorbed are recorded in ``absorbed_segments`` in the same transaction as their rows, so a
compaction killed half-way leaves each segment either absorbed once or still pending; the files are
removed only after the commit (a segment listed as absorbed is removed by the next compaction).
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timezone
from pathlib import Path

import duckdb

from . import segments as seg
from .errors import StoreError
from .migrations import migrate
from .opening import NO_EXTENSIONS, first_line
from .tables import RECORD_TABLES

__all__ = ["absorb"]

log = logging.getLogger(__name__.rpartition(".")[0] + ".store")  # the store's logger, as before the split


def absorb(conn: duckdb.DuckDBPyConnection, path: Path, segments_dir: Path) -> int:
    """Absorb every complete segment of ``segments_dir`` into the store file ``path`` open as ``conn``
    (read-write, migrated); return how many were absorbed."""
    names = seg.list_segments(segments_dir)
    if not names:
        seg.empty_trash(segments_dir)  # what a killed compaction or an older version left
        return 0
    done = {
        r[0]
        for r in conn.execute(
            "SELECT name FROM absorbed_segments WHERE name IN (SELECT unnest(?::VARCHAR[]))", [names]
        ).fetchall()
    }
    fresh = [n for n in names if n not in done]
    try:
        _insert_segments(conn, segments_dir, fresh)
        absorbed = len(fresh)
    except duckdb.Error:
        # One bad file must not block the rest: absorb one by one, setting aside only segments
        # that cannot be read on their own. A failure to write the database (a full disk) stops
        # here with every segment still pending.
        absorbed = 0
        for name in fresh:
            try:
                _insert_segments(conn, segments_dir, [name])
                absorbed += 1
            except duckdb.Error as exc:
                problem = _unreadable(segments_dir, name)
                if problem is None:
                    raise StoreError(f"{path}: could not write absorbed segments ({first_line(exc)}); "
                                     "they stay pending and nothing was lost") from exc
                dest = seg.quarantine(segments_dir, name)
                log.warning("looptrace: unreadable segment moved to %s: %s", dest, problem)
    seg.remove_segments(segments_dir, [n for n in names if n in done or (segments_dir / n).exists()])
    return absorbed


def _insert_segments(conn: duckdb.DuckDBPyConnection, segments_dir: Path, names: list[str]) -> None:
    if not names:
        return
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    conn.execute("BEGIN TRANSACTION")
    try:
        total = 0
        for table in RECORD_TABLES:
            files = seg.segment_files(segments_dir, names, table)
            if files:
                row = conn.execute(
                    f"INSERT INTO {table} BY NAME "
                    "SELECT * FROM read_parquet(?::VARCHAR[], union_by_name = true)",
                    [files],
                ).fetchone()
                total += int(row[0]) if row else 0
        conn.executemany(
            "INSERT INTO absorbed_segments VALUES (?, ?, ?)", [[n, now, None] for n in names]
        )
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended the transaction
            conn.execute("ROLLBACK")
        raise


def _unreadable(segments_dir: Path, name: str) -> str | None:
    """Why a segment cannot be absorbed anywhere (None: it can, so the store was the problem)."""
    trial = duckdb.connect(config=NO_EXTENSIONS)
    try:
        migrate(trial)
        for table in RECORD_TABLES:
            for f in seg.segment_files(segments_dir, [name], table):
                trial.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet(?)", [f])
        return None
    except duckdb.Error as exc:
        return first_line(exc)
    finally:
        trial.close()
