"""A DuckDB session over Iceberg tables: the store's base tables as views, the documented views on top.

pyiceberg plans a scan (which data files make up the table's current snapshot); DuckDB reads those
Parquet files directly and lazily, each column cast to the store's type (``parquet_views.py``), and
the views (``runs``, ``steps``, ...) are created by the same ``apply_views`` as in a DuckDB file:
the same SQL over both backends. A session over one partition's files is what one analysis task
reads.

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
from ..parquet_views import typed_select, view_sql
from ..tables import RECORD_TABLES

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["local_path", "open_session"]


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
    conn.execute(f"CREATE VIEW {table} AS SELECT * FROM _iceberg_{table}")


def open_session(tables: Mapping[str, Sequence[str] | pa.Table]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with each base table (local Parquet files, or an Arrow table already
    read) and the documented views. Tables not given are empty."""
    # No extension is loaded for a store; no progress bar on stdout (an analysis task's output is the caller's).
    conn = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        conn.execute("SET enable_progress_bar = false")
        for table in RECORD_TABLES:
            data = tables.get(table, ())
            if isinstance(data, (list, tuple)):
                conn.execute(view_sql(conn, table, data))
            else:
                _arrow_view(conn, table, data)
        apply_views(conn)
    except BaseException:
        conn.close()
        raise
    return conn
