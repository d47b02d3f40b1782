"""``looptrace export``: the store as partitioned Parquet, written once and then incrementally.

The unit of an incremental export is the *run*: a run's rows (its start and end records, steps,
tool calls, model calls, spans) are written together, exactly once, by the first export that finds
the run *ready*: ended, or silent for ``STALE_AFTER`` (a process that died). Timestamps alone cannot
say what is new: they are event times, so a run imported today may carry last year's times, and a
segment from another process can land after a later-ending run was exported. So each export takes
the ready runs from ``since`` on (the previous export's cut minus ``GRACE``, for ``auto``) and skips
the runs already in the folder: an overlapping window never duplicates, and a late run inside the
grace is still caught. Rows outside any run (``writer_stats``, ``export_drops``, spans and model
calls with no run) are taken by their own time from ``since`` on, skipping the keys already there.
``diagnoses`` are replaced when a run is re-analysed, so an export writes them whole, as a new
snapshot that supersedes the previous one, whenever they changed. Layout and manifest: ``layout.py``,
docs/parquet.md.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import duckdb

from ..store import SCHEMA_VERSION, Store, segments_dir

from .layout import (
    PARTITIONS,
    ExportEntry,
    ExportError,
    Manifest,
    export_id_of,
    fsync,
    part_files,
    read_manifest,
    table_dir,
    write_manifest,
)

__all__ = ["ExportReport", "export_parquet", "parse_since", "GRACE", "STALE_AFTER"]

GRACE = timedelta(hours=1)  # how late after its end a run may land in the store and still be caught by `auto`
STALE_AFTER = timedelta(hours=1)  # a run silent this long without an end record is exported as it is

# Every run: where its rows go (day, agent) and when it became ready to export: when its end was
# recorded, or, for a run that never ended, STALE_AFTER after it was last seen.
RUN_PLAN = """
CREATE TEMP TABLE _run_plan AS
SELECT r.run_id, r.agent, r.started_at,
       CAST(coalesce(r.started_at, r.last_seen_at) AS DATE) AS day,
       e.finished_at IS NOT NULL AS finished,
       coalesce(e.finished_at, r.last_seen_at + to_microseconds($stale_us)) AS ready_at
FROM runs r
LEFT JOIN (SELECT run_id, max(recorded_at) AS finished_at FROM run_records
           WHERE ended_at IS NOT NULL GROUP BY run_id) e USING (run_id)
"""

# The runs this export writes: ready by the cut, not before `since`, not already in the folder.
EXPORT_RUNS = """
CREATE TEMP TABLE _export_runs AS
SELECT run_id, agent, day FROM _run_plan
WHERE (finished OR ready_at <= $cut)
  AND (CAST($since AS TIMESTAMP) IS NULL OR ready_at >= $since)
  AND run_id NOT IN (SELECT run_id FROM _exported_runs)
"""

# Runs not ready yet (still running): a later export takes them.
WAITING = "SELECT count(*) FROM _run_plan WHERE NOT finished AND ready_at > $cut"

# Spans with no run id (another library's spans, e.g. the anthropic SDK's own) are filed under the
# earliest-started run of their trace, so a run's spans share its partition.
TRACE_PLAN = """
CREATE TEMP TABLE _trace_plan AS
SELECT r.trace_id, arg_min(p.agent, p.started_at) AS agent, arg_min(p.day, p.started_at) AS day
FROM (SELECT DISTINCT run_id, trace_id FROM run_records WHERE trace_id IS NOT NULL) r
JOIN _run_plan p USING (run_id)
GROUP BY r.trace_id
"""

# Rows that go with their run. `run_records` has its own `agent` column, which is its partition.
RUN_ROWS = {
    "run_records": "SELECT t.*, e.day FROM run_records t JOIN _export_runs e USING (run_id)",
    **{
        table: f"SELECT t.*, e.day, e.agent FROM {table} t JOIN _export_runs e USING (run_id)"
        for table in ("step_records", "tool_call_records", "llm_call_records", "spans")
    },
}


@dataclass(frozen=True)
class _Loose:
    """Rows taken by their own time, not with a run: which rows, their time, identity and partition."""

    where: str
    time: str
    key: tuple[str, ...]
    partition: str  # the SELECT list after t.*: day (and agent)
    join: str = ""


LOOSE: dict[str, _Loose] = {
    "llm_call_records": _Loose(
        where="t.run_id IS NULL", time="coalesce(t.ended_at, t.started_at)", key=("call_id",),
        partition="CAST(coalesce(t.started_at, t.ended_at) AS DATE) AS day, CAST(NULL AS VARCHAR) AS agent",
    ),
    "spans": _Loose(
        where="t.run_id IS NULL", time="coalesce(t.end_time, t.start_time)", key=("trace_id", "span_id"),
        partition="coalesce(p.day, CAST(coalesce(t.start_time, t.end_time) AS DATE)) AS day, p.agent",
        join="LEFT JOIN _trace_plan p USING (trace_id)",
    ),
    "writer_stats": _Loose(
        where="true", time="t.recorded_at", key=("pid", "host", "recorded_at"),
        partition="CAST(t.recorded_at AS DATE) AS day",
    ),
    # Written when a tracing process shuts down, which may be after its run was exported.
    "export_drops": _Loose(
        where="true", time="t.recorded_at", key=("run_id", "exporter", "recorded_at"),
        partition="coalesce(p.day, CAST(t.recorded_at AS DATE)) AS day, p.agent",
        join="LEFT JOIN _run_plan p USING (run_id)",
    ),
}

# Whether the diagnoses changed since the last snapshot (re-analysis rewrites analyzed_at).
DIAGNOSES_FINGERPRINT = "SELECT count(*) || ':' || coalesce(bit_xor(hash(d)), 0) FROM diagnoses d"

# Replaced on re-analysis, so exported whole, as a new snapshot, whenever they changed.
DIAGNOSES = """
SELECT t.*, coalesce(p.day, CAST(t.analyzed_at AS DATE)) AS day, p.agent
FROM diagnoses t LEFT JOIN _run_plan p USING (run_id)
"""


def _loose_sql(table: str, rule: _Loose) -> str:
    same = " AND ".join(f"s.{k} IS NOT DISTINCT FROM t.{k}" for k in rule.key)
    return (
        f"SELECT t.*, {rule.partition} FROM {table} t {rule.join} "
        f"WHERE {rule.where} AND (CAST($since AS TIMESTAMP) IS NULL OR {rule.time} >= $since) "
        f"AND NOT EXISTS (SELECT 1 FROM _seen_{table} s WHERE {same})"
    )


def _table_sql(table: str) -> str:
    if table == "diagnoses":
        return DIAGNOSES
    parts = [RUN_ROWS[table]] if table in RUN_ROWS else []
    if table in LOOSE:
        parts.append(_loose_sql(table, LOOSE[table]))
    return "\nUNION ALL BY NAME\n".join(parts)


@dataclass(frozen=True)
class ExportReport:
    export_id: str
    folder: Path
    runs: int
    rows: dict[str, int]
    files: int
    bytes: int
    seconds: float
    since: datetime | None
    high_water: datetime
    waiting: int  # runs not ready yet (still running): a later export takes them

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())


def _utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _iso(t: datetime) -> str:
    return t.isoformat(timespec="microseconds") + "Z"


def parse_since(value: str) -> datetime | Literal["auto"]:
    """``auto`` or an ISO 8601 date or time (UTC unless it names a zone)."""
    if value == "auto":
        return "auto"
    try:
        t = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"--since: expected 'auto' or an ISO 8601 time (2026-01-31T12:00), not {value!r}") \
            from exc
    return t.astimezone(timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def _sql_str(path: Path) -> str:
    return str(path).replace("'", "''")


class _FolderLock:
    """One export at a time per folder: two at once would both take the same new runs."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".lock"

    def __enter__(self) -> _FolderLock:
        import fcntl  # POSIX only: imported here so that the rest of looptrace loads anywhere

        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(self._fd)
            raise ExportError(
                f"{self.path.parent}: another export is writing this folder; try again when it ends."
            ) from exc
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing releases the lock


def _prepare_folder(folder: Path) -> None:
    """Create the folder, or check that it is an export: never scatter files into someone's folder."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"{folder}: cannot create the export folder: {exc}") from exc
    if read_manifest(folder) is None and any(e.name != ".lock" for e in folder.iterdir()):
        raise ExportError(f"{folder}: not empty and not a looptrace export (no _looptrace.json); "
                          "choose a new or empty folder. Nothing was written.")


def _remove_unreadable(folder: Path, manifest: Manifest) -> None:
    """Files of exports that never committed (a crash) or of superseded diagnoses snapshots."""
    for entry in folder.glob(".staging-*"):
        shutil.rmtree(entry, ignore_errors=True)
    for table in PARTITIONS:
        keep = manifest.readable(table)
        for path in part_files(folder, table):
            if export_id_of(path) not in keep:
                path.unlink(missing_ok=True)
                _prune_empty(path.parent, table_dir(folder, table))


def _prune_empty(directory: Path, stop: Path) -> None:
    while directory != stop and directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
        directory = directory.parent


def _load_folder_keys(conn: duckdb.DuckDBPyConnection, folder: Path, manifest: Manifest,
                      since: datetime | None) -> None:
    """What the folder already holds: its run ids, and the keys of its loose rows from `since` on."""
    def files(table: str) -> list[str]:
        return [str(p) for p in part_files(folder, table, manifest.committed())]

    conn.execute("CREATE TEMP TABLE _exported_runs AS SELECT run_id FROM run_records WHERE false")
    if runs := files("run_records"):
        conn.execute("INSERT INTO _exported_runs SELECT DISTINCT run_id FROM read_parquet(?::VARCHAR[])",
                     [runs])
    for table, rule in LOOSE.items():
        keys = ", ".join(rule.key)
        conn.execute(f"CREATE TEMP TABLE _seen_{table} AS SELECT {keys} FROM {table} WHERE false")
        if paths := files(table):
            conn.execute(
                f"INSERT INTO _seen_{table} SELECT {keys} "
                "FROM read_parquet($files::VARCHAR[], union_by_name = true) t "
                f"WHERE {rule.where} AND (CAST($since AS TIMESTAMP) IS NULL OR {rule.time} >= $since)",
                {"files": paths, "since": since},
            )


def _copy(conn: duckdb.DuckDBPyConnection, table: str, staging: Path, export_id: str,
          params: dict[str, Any]) -> int:
    sql = _table_sql(table)
    used = {k: v for k, v in params.items() if f"${k}" in sql}
    target = _sql_str(table_dir(staging, table))
    keys = ", ".join(PARTITIONS[table])
    row = conn.execute(
        f"COPY ({sql}) TO '{target}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY ({keys}), "
        f"WRITE_PARTITION_COLUMNS true, FILENAME_PATTERN 'part-{export_id}-{{i}}')",
        used,
    ).fetchone()
    return int(row[0]) if row else 0


def _publish(staging: Path, folder: Path) -> tuple[int, int]:
    """Move the staged files into place (each rename atomic), durable before the manifest names them."""
    moved, size, parents = 0, 0, set[Path]()
    for root, _dirs, files in os.walk(staging):
        for name in files:
            src = Path(root) / name
            dest = folder / src.relative_to(staging)
            dest.parent.mkdir(parents=True, exist_ok=True)
            fsync(src)
            size += src.stat().st_size
            os.rename(src, dest)
            parents.update(p for p in dest.parents if p == folder or folder in p.parents)
            moved += 1
    for directory in parents:
        fsync(directory)
    return moved, size


def export_parquet(
    db: str | os.PathLike[str], folder: str | os.PathLike[str], *,
    since: datetime | Literal["auto"] | None = None, grace: timedelta = GRACE,
    stale: timedelta = STALE_AFTER, on_table: Callable[[str], None] | None = None,
) -> ExportReport:
    """Write what ``folder`` does not hold yet of the store at ``db`` (everything, the first time).
    ``on_table(name)`` is called as each of the ``PARTITIONS`` is done (progress)."""
    started = time.perf_counter()
    db_path, out = Path(db), Path(folder)
    if not db_path.exists() and not segments_dir(db_path).exists():
        raise ExportError(f"{db_path}: no such store. Point --db at a looptrace store file.")
    _prepare_folder(out)
    with _FolderLock(out):
        manifest = read_manifest(out) or Manifest()
        _remove_unreadable(out, manifest)
        if since == "auto":
            mark = manifest.high_water
            since = datetime.fromisoformat(mark).replace(tzinfo=None) - grace if mark else None
        cut = _utc_now()
        export_id = uuid.uuid4().hex
        staging = out / f".staging-{export_id}"
        staging.mkdir()
        try:
            params = {"since": since, "cut": cut, "stale_us": int(stale / timedelta(microseconds=1))}
            rows = dict.fromkeys(PARTITIONS, 0)
            with Store(db_path).reader(locked_down=False) as conn:
                conn.execute(RUN_PLAN, {"stale_us": params["stale_us"]})
                _load_folder_keys(conn, out, manifest, since)
                conn.execute(EXPORT_RUNS, {"since": since, "cut": cut})
                conn.execute(TRACE_PLAN)
                fingerprint = str(_scalar(conn, DIAGNOSES_FINGERPRINT))
                snapshot = fingerprint != manifest.diagnoses_fingerprint
                for table in PARTITIONS:
                    if table != "diagnoses" or snapshot:
                        rows[table] = _copy(conn, table, staging, export_id, params)
                    if on_table is not None:
                        on_table(table)
                runs = int(_scalar(conn, "SELECT count(*) FROM _export_runs"))
                waiting = int(_scalar(conn, WAITING, {"cut": cut}))
            files, size = _publish(staging, out)
            manifest.high_water, manifest.exported_at = _iso(cut), _iso(_utc_now())
            if any(n for t, n in rows.items() if t != "diagnoses"):
                manifest.exports.append(ExportEntry(
                    id=export_id, exported_at=manifest.exported_at, high_water=manifest.high_water,
                    since=_iso(since) if since else None, store=str(db_path), runs=runs, rows=rows,
                ))
            if snapshot:
                manifest.diagnoses_export, manifest.diagnoses_fingerprint = export_id, fingerprint
            manifest.schema_version = SCHEMA_VERSION  # a newer folder was refused by read_manifest
            write_manifest(out, manifest)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _remove_unreadable(out, manifest)
    seconds = time.perf_counter() - started
    return ExportReport(export_id, out, runs, rows, files, size, seconds, since, cut, waiting)


def _scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> Any:
    row = conn.execute(sql, params or {}).fetchone()
    return row[0] if row else None
