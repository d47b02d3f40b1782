"""A base table as a view over Parquet files, typed as the store's table.

Shared by every reader whose tables are Parquet files rather than a DuckDB file: a Parquet export
(``export/source.py``) and an Iceberg catalog's data files (``iceberg/session.py``). Each column is
cast to the store's type at the current schema version, so a file written before a migration
added a column reads it as NULL, and the documented views apply unchanged on top.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from .migrations import migrate

__all__ = ["described_tables", "table_columns", "use_described", "view_sql"]


# table -> its (name, type) columns, and each view's: described once per process (``described_tables``).
Described = dict[str, tuple[tuple[str, str], ...]]
_described: Described | None = None


def _migrated_columns() -> Described:
    """Every table and view of a freshly migrated database, described once: migrating is ~0.1 s, and a
    reader asks for each of the ~17 tables (an analysis task's worker did 17 migrations before)."""
    global _described
    if _described is None:
        conn = duckdb.connect()
        try:
            migrate(conn)
            names = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() UNION ALL "
                                                "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
            _described = {name: tuple((r[0], r[1]) for r in conn.execute(f'DESCRIBE "{name}"').fetchall())
                          for name in names}
        finally:
            conn.close()
    return _described


def described_tables() -> Described:
    """The description ``table_columns`` reads, to hand to another process of the same looptrace."""
    return dict(_migrated_columns())


def use_described(described: Described) -> None:
    """Take the description another process of the same looptrace made (``described_tables``) instead of
    migrating here: a Ray worker gets its driver's, and spares the migration (~0.15 s of CPU each)."""
    global _described
    if _described is None:
        _described = dict(described)


def table_columns(table: str) -> tuple[tuple[str, str], ...]:
    """(name, type) of a base table at the current schema version, from a freshly migrated database."""
    try:
        return _migrated_columns()[table]
    except KeyError:
        raise duckdb.CatalogException(f"Table with name {table} does not exist!") from None


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def typed_select(table: str, present: set[str]) -> str:
    """The select list casting each of ``table``'s columns (NULL where ``present`` lacks it)."""
    return ", ".join(f"CAST({_quote(name) if name in present else 'NULL'} AS {kind}) AS {_quote(name)}"
                     for name, kind in table_columns(table))


def view_sql(conn: duckdb.DuckDBPyConnection, table: str, files: Sequence[str], *, typed_as: str | None = None) -> str:
    """``CREATE VIEW table`` over ``files``, typed as the base table ``typed_as`` (default ``table``);
    with no files, an empty view of the right shape."""
    name, table = table, typed_as or table
    if not files:
        return f"CREATE VIEW {name} AS SELECT {typed_select(table, set())} WHERE false"
    source = (f"read_parquet([{', '.join(_literal(str(f)) for f in files)}], "
              "hive_partitioning = false, union_by_name = true)")
    present = {r[0] for r in conn.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    return f"CREATE VIEW {name} AS SELECT {typed_select(table, present)} FROM {source}"
