"""Schema migrations: small named functions, recorded in ``schema_migrations``, applied on open.

A store written by a newer looptrace (a version this code does not know) is refused rather than
guessed at: see ``StoreError`` in ``errors.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timezone

import duckdb

from ..records.actions import NEAR_OBSERVATION_KEY_SQL, PROGRESS_KEY_SQL, call_key
from .errors import StoreError
from .tables import (
    EXPORT_DROPS, LIVE_TABLES, LIVE_TRACES, LOG_RECORDS, RECEIVED_LOGS, RECEIVED_SPANS, REDACTION_RECORDS, SCHEMA_MIGRATIONS, TABLES,
    live_table_ddl,
)
from .views import VIEW_NAMES, VIEWS

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "apply_views", "schema_version", "views_current"]


def _m001_initial(conn: duckdb.DuckDBPyConnection) -> None:
    for ddl in TABLES.values():
        conn.execute(ddl)


def _m002_run_totals(conn: duckdb.DuckDBPyConnection) -> None:
    # Imported trajectories often know only a run's totals, not per-step usage.
    for column, kind in (("input_tokens", "BIGINT"), ("output_tokens", "BIGINT"), ("cost_usd", "DOUBLE")):
        conn.execute(f"ALTER TABLE run_records ADD COLUMN {column} {kind}")


def _m003_export_drops(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute(EXPORT_DROPS)


def _m004_action_key(conn: duckdb.DuckDBPyConnection) -> None:
    # Each call's action identity (records/actions.py), so SQL, the analyzer, diff and the viewer
    # agree on when two steps are the same action. Rows stored before it get theirs here, computed
    # by the same Python function the sink uses, a batch at a time.
    import pyarrow as pa  # here, not at the top: opening a store to read it needs no pyarrow

    conn.execute("ALTER TABLE tool_call_records ADD COLUMN action_key VARCHAR")
    reader = conn.sql(
        "SELECT rowid, tool, CAST(args AS VARCHAR) AS args FROM tool_call_records WHERE tool IS NOT NULL"
    ).to_arrow_reader(batch_size=100_000)
    keyed = [pa.table({"rid": b.column("rowid"),
                       "k": [call_key(tool, args) for tool, args in zip(b.column("tool").to_pylist(),
                                                                        b.column("args").to_pylist())]})
             for b in reader]
    for keys in keyed:  # noqa: B007 - read by SQL
        conn.execute("UPDATE tool_call_records SET action_key = keys.k FROM keys WHERE tool_call_records.rowid = keys.rid")


def _m005_redaction_manifest(conn: duckdb.DuckDBPyConnection) -> None:
    # Where the sink redacted what, by which rule (never the value): the `redactions` view.
    conn.execute(REDACTION_RECORDS)


def _m006_received_spans(conn: duckdb.DuckDBPyConnection) -> None:
    # The OTLP receiver's journal: what ``looptrace collect`` acknowledged, before its trace ends.
    conn.execute(RECEIVED_SPANS)


def _m007_outcome_keys(conn: duckdb.DuckDBPyConnection) -> None:
    # What the analyzer compares repeated calls by (records/actions.py): kept per call since the sink
    # computes them at write time, so an analysis reads two hashes instead of running two regex passes
    # over every observation each time. Rows stored before get theirs here, by the SQL forms of the
    # same keys (one vectorised pass; tests/test_progress.py checks both forms agree).
    conn.execute("ALTER TABLE tool_call_records ADD COLUMN progress_key VARCHAR")
    conn.execute("ALTER TABLE tool_call_records ADD COLUMN near_key VARCHAR")
    conn.execute(f"UPDATE tool_call_records SET progress_key = {PROGRESS_KEY_SQL}, "
                 f"near_key = {NEAR_OBSERVATION_KEY_SQL} WHERE observation IS NOT NULL")


def _m008_live_previews(conn: duckdb.DuckDBPyConnection) -> None:
    # What ``looptrace collect`` has derived so far of traces still open (tables.py, LIVE_TABLES): the
    # runs view shows such a run as ``running`` until its trace is written.
    conn.execute(LIVE_TRACES)
    for table in LIVE_TABLES:
        conn.execute(live_table_ddl(table))


def _m009_messages_drop(conn: duckdb.DuckDBPyConnection) -> None:
    # How many leading messages of the base call's request a call no longer sends (records/requests.py):
    # an agent that sends a window of its history stored the whole window on every call before. Older
    # rows need nothing: NULL reads as 0, which is what they meant.
    conn.execute("ALTER TABLE llm_call_records ADD COLUMN messages_drop INTEGER")
    # A preview table keeps its record table's columns, then its two tags (tables.py): rebuilt so.
    live = LIVE_TABLES["llm_call_records"]
    conn.execute(f"CREATE TABLE {live}_9 AS SELECT * EXCLUDE (live_trace_id, live_revision), "
                 f"CAST(NULL AS INTEGER) AS messages_drop, live_trace_id, live_revision FROM {live}")
    conn.execute(f"DROP TABLE {live}")
    conn.execute(f"ALTER TABLE {live}_9 RENAME TO {live}")


def _m010_log_records(conn: duckdb.DuckDBPyConnection) -> None:
    # OTLP log records (GenAI events) and the receiver's journal of them (tables.py).
    conn.execute(LOG_RECORDS)
    conn.execute(RECEIVED_LOGS)


MIGRATIONS: tuple[tuple[int, str, Callable[[duckdb.DuckDBPyConnection], None]], ...] = (
    (1, "initial", _m001_initial),
    (2, "run_totals", _m002_run_totals),
    (3, "export_drops", _m003_export_drops),
    (4, "action_key", _m004_action_key),
    (5, "redaction_manifest", _m005_redaction_manifest),
    (6, "received_spans", _m006_received_spans),
    (7, "outcome_keys", _m007_outcome_keys),
    (8, "live_previews", _m008_live_previews),
    (9, "messages_drop", _m009_messages_drop),
    (10, "log_records", _m010_log_records),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def schema_version(conn: duckdb.DuckDBPyConnection, catalog: str | None = None) -> int:
    prefix = f"{catalog}." if catalog else ""
    try:
        row = conn.execute(f"SELECT max(version) FROM {prefix}schema_migrations").fetchone()
    except duckdb.CatalogException:
        return 0
    return int(row[0] or 0) if row else 0


# Each view in a file carries this as its comment, so an open can tell the views are this code's
# and skip recreating them: that was ~20 ms of every compaction, and catalog writes to checkpoint.
VIEWS_MARK = "looptrace views " + hashlib.sha256("\n".join(VIEWS).encode()).hexdigest()[:16]


def apply_views(conn: duckdb.DuckDBPyConnection) -> None:
    for sql in VIEWS:
        conn.execute(sql)


def views_current(conn: duckdb.DuckDBPyConnection) -> bool:
    row = conn.execute(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database() AND comment = ?",
        [VIEWS_MARK],
    ).fetchone()
    return bool(row) and row[0] == len(VIEW_NAMES)


def _mark_views(conn: duckdb.DuckDBPyConnection) -> None:
    for name in VIEW_NAMES:
        conn.execute(f"COMMENT ON VIEW {name} IS '{VIEWS_MARK}'")


def migrate(conn: duckdb.DuckDBPyConnection, path: str = ":memory:") -> int:
    """Bring ``conn``'s database to ``SCHEMA_VERSION``; return the number of migrations applied."""
    conn.execute(SCHEMA_MIGRATIONS)
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: written by a newer looptrace (schema version {current}, this one knows up to "
            f"{SCHEMA_VERSION}). Upgrade looptrace to read it; the file was not changed."
        )
    applied = 0
    for version, name, step in MIGRATIONS:
        if version <= current:
            continue
        conn.execute("BEGIN TRANSACTION")
        try:
            step(conn)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [version, name, datetime.now(timezone.utc).replace(tzinfo=None)],
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        applied += 1
    if applied or not views_current(conn):
        apply_views(conn)
        _mark_views(conn)
    return applied
