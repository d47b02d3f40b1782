"""Reading a Parquet export as if it were a store: the same base tables, the same views.

A ``ParquetSource`` session is an in-memory DuckDB where each base table is a view over the
export's committed files, cast to the current schema (columns an older export lacks read as NULL),
and ``apply_views`` adds ``runs``, ``steps``, ... on top, so every query and the analyzer give the
same rows as over the store. The views stay lazy, so a large export is never loaded whole: a
locked-down session may read files in the export folder and nowhere else (DuckDB's
``allowed_directories``), and still cannot write, attach, load extensions or change settings.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from ..store import Store, lockdown
from ..store.migrations import apply_views, migrate
from ..store.tables import RECORD_TABLES

from .layout import MANIFEST, ExportError, Manifest, part_files, read_manifest

__all__ = ["ParquetSource", "open_source", "table_columns"]


@functools.cache
def table_columns(table: str) -> tuple[tuple[str, str], ...]:
    """(name, type) of a base table at the current schema version, from a freshly migrated database."""
    conn = duckdb.connect()
    try:
        migrate(conn)
        return tuple((r[0], r[1]) for r in conn.execute(f"DESCRIBE {table}").fetchall())
    finally:
        conn.close()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _view_sql(conn: duckdb.DuckDBPyConnection, table: str, files: list[Path]) -> str:
    columns = table_columns(table)
    if not files:
        select = ", ".join(f"CAST(NULL AS {kind}) AS {_quote(name)}" for name, kind in columns)
        return f"CREATE VIEW {table} AS SELECT {select} WHERE false"
    source = (f"read_parquet([{', '.join(_literal(str(f)) for f in files)}], "
              "hive_partitioning = false, union_by_name = true)")
    present = {r[0] for r in conn.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    select = ", ".join(
        f"CAST({_quote(name) if name in present else 'NULL'} AS {kind}) AS {_quote(name)}"
        for name, kind in columns
    )
    return f"CREATE VIEW {table} AS SELECT {select} FROM {source}"


class ParquetSource:
    """A folder written by ``looptrace export``, read-only."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ParquetSource({str(self.path)!r})"

    def manifest(self) -> Manifest:
        manifest = read_manifest(self.path)
        if manifest is None:
            raise ExportError(f"{self.path}: not a looptrace Parquet export (no {MANIFEST}).")
        return manifest

    @contextmanager
    def reader(
        self, *, locked_down: bool = True, absorb: bool = True, memory_limit: str = "2GB",
        scratch: str | None = None, **_: object,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only session over the export; ``absorb`` is accepted for ``Store`` compatibility."""
        manifest = self.manifest()
        folder = self.path.resolve()
        conn = duckdb.connect()
        try:
            try:
                for table in RECORD_TABLES:
                    conn.execute(_view_sql(conn, table, part_files(folder, table, manifest.readable(table))))
            except duckdb.Error as exc:
                raise ExportError(f"{self.path}: cannot read the export: {str(exc).splitlines()[0]}") from exc
            apply_views(conn)
            if locked_down:
                conn.execute(f"SET allowed_directories = [{_literal(str(folder) + os.sep)}]")
                lockdown(conn, memory_limit=memory_limit, scratch=scratch)
            yield conn
        finally:
            conn.close()

    @contextmanager
    def writer(self, **_: object) -> Iterator[duckdb.DuckDBPyConnection]:
        raise ExportError(f"{self.path}: a Parquet export is read-only; write to the store it came from.")
        yield  # pragma: no cover - makes this a generator


def open_source(path: str | os.PathLike[str]) -> Store | ParquetSource:
    """A ``Store`` for a store file, a ``ParquetSource`` for an export folder."""
    p = Path(path)
    if p.is_dir():
        if (p / MANIFEST).is_file():
            return ParquetSource(p)
        raise ExportError(f"{p}: a folder, but not a looptrace Parquet export (no {MANIFEST}). "
                          "Point --db at a store file or at a folder written by `looptrace export`.")
    return Store(p)
