"""A reader's session: the store file attached read-only, plus the segments still pending, under the
documented views; and the lockdown that user SQL runs under.

A reader never waits for a writer to absorb: what the file holds and what live processes have
flushed since are read together (``session_views``), so every flushed step is seen even while
another process holds the file. When nothing is pending and the file is current, the file's own
views are the whole store and the session builds none (``file_views``).
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from . import segments as seg
from .migrations import SCHEMA_VERSION, schema_version, views_current
from .opening import sql_str
from .tables import RECORD_TABLES

__all__ = ["file_views", "lockdown", "session_views"]


def session_views(conn: duckdb.DuckDBPyConnection, segments_dir: Path) -> None:
    """One view per record table over the attached file (``store``) and the segments pending in
    ``segments_dir``, copied into temporary tables."""
    names = seg.list_segments(segments_dir)
    if names:
        done = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM store.absorbed_segments WHERE name IN (SELECT unnest(?::VARCHAR[]))",
                [names],
            ).fetchall()
        }
        names = [n for n in names if n not in done]
    present = {r[0] for r in conn.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = 'store'").fetchall()}
    # A file at the current schema version has every column; checking each table against the
    # Arrow schema would migrate an in-memory database per table (~50 ms each, on every read).
    current = schema_version(conn, "store") >= SCHEMA_VERSION
    for table in (*RECORD_TABLES, "absorbed_segments"):
        base = f"store.{table}"
        if table not in present:  # added by a migration this file has not had yet (it was busy)
            import pyarrow as pa  # only here: most reads need no pyarrow, and it costs start-up

            empty = pa.Table.from_pylist([], schema=seg.arrow_schema(table))  # noqa: F841 - read by SQL
            conn.execute(f"CREATE TEMP TABLE _missing_{table} AS SELECT * FROM empty")
            base = f"_missing_{table}"
        files = seg.segment_files(segments_dir, names, table) if table in RECORD_TABLES else []
        if files:
            # Copied in now: once locked down, the session may no longer read files.
            try:
                conn.execute(
                    f"CREATE TEMP TABLE _pending_{table} AS SELECT * FROM read_parquet(?::VARCHAR[], "
                    "union_by_name = true)",
                    [files],
                )
            except duckdb.IOException:
                # A segment absorbed and removed since we listed it is already in the file.
                files = []
        parts = [f"SELECT * FROM {base}"] + ([f"SELECT * FROM _pending_{table}"] if files else [])
        if table in RECORD_TABLES and not current and _lacks_columns(conn, base, table):
            # A file a migration has not reached yet (it was busy): the columns added since read as NULL.
            import pyarrow as pa

            shape = pa.Table.from_pylist([], schema=seg.arrow_schema(table))  # noqa: F841 - read by SQL
            conn.execute(f"CREATE TEMP TABLE _shape_{table} AS SELECT * FROM shape")
            parts.append(f"SELECT * FROM _shape_{table}")
        conn.execute(f"CREATE VIEW {table} AS " + " UNION ALL BY NAME ".join(parts))


def _lacks_columns(conn: duckdb.DuckDBPyConnection, base: str, table: str) -> bool:
    have = {r[0] for r in conn.execute(f"DESCRIBE {base}").fetchall()}
    return not set(seg.arrow_schema(table).names) <= have


def file_views(conn: duckdb.DuckDBPyConnection, segments_dir: Path) -> bool:
    """Read the file's own tables and views (``USE store``) when they are the whole store: no segment
    is pending, the file is at this code's schema and its views are this code's. Then the session
    needs no views of its own, whose creation (binding 10 views, ~40 ms CPU) was most of opening a
    store for one query. Only for locked-down sessions, which run queries alone: the file is
    attached read-only, so a caller's non-temporary CREATE would fail there."""
    if seg.list_segments(segments_dir) or schema_version(conn, "store") != SCHEMA_VERSION:
        return False
    conn.execute("USE store")
    if views_current(conn):
        return True
    conn.execute("USE memory")
    return False


def lockdown(conn: duckdb.DuckDBPyConnection, *, memory_limit: str = "2GB", scratch: str | None = None) -> None:
    """No file access, no extensions, no setting changes: what user SQL may run under.

    ``scratch`` (a private folder) takes DuckDB's spill files and its secrets folder: otherwise they
    default to ``./.tmp`` and ``~/.duckdb``, and ``duckdb_settings()`` shows the working and home
    directories to the query (docs/reliability.md says what user SQL may see).
    """
    if scratch is not None:
        conn.execute(f"SET temp_directory = '{sql_str(Path(scratch))}'")
        conn.execute(f"SET secret_directory = '{sql_str(Path(scratch) / 'secrets')}'")
    conn.execute(f"SET memory_limit = '{memory_limit}'")
    conn.execute("SET autoinstall_known_extensions = false")
    conn.execute("SET autoload_known_extensions = false")
    conn.execute("SET allow_community_extensions = false")
    conn.execute("SET enable_external_access = false")
    # DuckDB draws a progress bar on stdout for a query over ~2 s: inside the viewer (a search over a
    # million steps) that would scribble over the Textual screen. Off before the settings are locked.
    conn.execute("SET enable_progress_bar = false")
    conn.execute("SET lock_configuration = true")
