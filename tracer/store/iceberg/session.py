"""A DuckDB session over Iceberg tables: the store's base tables as views, the documented views on top.

pyiceberg plans a scan (which data files make up the table's current snapshot); DuckDB reads those
Parquet files directly and lazily, each column cast to the store's type (``parquet_views.py``), and
the views (``runs``, ``steps``, ...) are created by the same ``apply_views`` as in a DuckDB file:
the same SQL over both backends. A session over one partition's files is what one analysis task
reads.

Iceberg has no commit across tables: a batch is appended table by table, ``run_records`` last, and a
writer killed between two of its commits leaves rows of a run in some tables only. So a run exists
once its ``run_records`` row does: every other base table here shows only rows of no run or of a run
in ``run_records`` (``_KNOWN_RUN``), and a crashed batch's rows stay out of sight until a re-run
replaces them (``CatalogStore.delete_runs``). A partition holds whole runs, so this holds per
partition too.

Data files that DuckDB cannot read alone (on an object store, which needs an extension, or with
delete files, which pyiceberg's own deletes never write but other engines may) are read through
pyiceberg's Arrow scan instead, into the session's memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlparse

import duckdb

from ..migrations import apply_views
from ..parquet_views import table_columns, typed_select, view_sql
from ..tables import RECORD_TABLES

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["local_path", "open_session", "KNOWN_RUN_TABLES"]

# Rows of a run that run_records does not (yet) know are a crashed or unfinished batch's: hidden.
_KNOWN_RUN = "CREATE VIEW {table} AS SELECT * FROM _iceberg_{table} WHERE run_id IS NULL OR run_id IN " \
             "(SELECT run_id FROM run_records)"
# The tables filtered so: every one with a run_id column but run_records itself.
KNOWN_RUN_TABLES: tuple[str, ...] = tuple(
    t for t in RECORD_TABLES if t != "run_records" and any(name == "run_id" for name, _ in table_columns(t)))


def local_path(uri: str) -> str | None:
    """A data file's local path, or None when it lives elsewhere (s3://, gs://, ...)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    if parsed.scheme == "":
        return uri
    return None


def _arrow_view(conn: duckdb.DuckDBPyConnection, table: str, data: pa.Table) -> None:
    conn.register(f"_arrow_{table}", data)
    select = typed_select(table, set(data.schema.names))
    conn.execute(f"CREATE TEMP TABLE _iceberg_{table} AS SELECT {select} FROM _arrow_{table}")
    conn.unregister(f"_arrow_{table}")


def open_session(tables: Mapping[str, Sequence[str] | pa.Table]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with each base table (local Parquet files, or an Arrow table already
    read) and the documented views. Tables not given are empty."""
    # No extension is loaded for a store; no progress bar on stdout (an analysis task's output is the caller's).
    conn = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        conn.execute("SET enable_progress_bar = false")
        for table in sorted(RECORD_TABLES, key=lambda t: t != "run_records"):  # the others' views read it
            data = tables.get(table, ())
            if isinstance(data, (list, tuple)):
                conn.execute(view_sql(conn, f"_iceberg_{table}", data, typed_as=table))
            else:
                _arrow_view(conn, table, data)
            conn.execute(_KNOWN_RUN.format(table=table) if table in KNOWN_RUN_TABLES
                         else f"CREATE VIEW {table} AS SELECT * FROM _iceberg_{table}")
        apply_views(conn)
    except BaseException:
        conn.close()
        raise
    return conn
