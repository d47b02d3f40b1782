"""Reading a Parquet export as if it were a store: the same base tables, the same views.

A ``ParquetSource`` session is an in-memory DuckDB where each base table is a view over the
export's committed files, cast to the current schema (columns an older export lacks read as NULL),
and ``apply_views`` adds ``runs``, ``steps``, ... on top, so every query and the analyzer give the
same rows as over the store. The views stay lazy, so a large export is never loaded whole: a
locked-down session may read files in the export folder and nowhere else (DuckDB's
``allowed_directories``), and still cannot write, attach, load extensions or change settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..store import Store, lockdown
from ..store.backend import catalog_name
from ..store.migrations import apply_views
from ..store.parquet_views import table_columns, view_sql
from ..store.tables import RECORD_TABLES

from .layout import MANIFEST, ExportError, Manifest, part_files, read_manifest

if TYPE_CHECKING:
    from ..store.iceberg import CatalogStore

__all__ = ["ParquetSource", "open_source", "table_columns"]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


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
                    files = part_files(folder, table, manifest.readable(table))
                    conn.execute(view_sql(conn, table, [str(f) for f in files]))
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


def open_source(path: str | os.PathLike[str]) -> Store | ParquetSource | CatalogStore:
    """A ``Store`` for a store file, a ``ParquetSource`` for an export folder, a ``CatalogStore`` for
    ``iceberg:NAME`` (``store/backend.py``)."""
    name = catalog_name(path)
    if name is not None:
        from ..store.iceberg import CatalogStore

        return CatalogStore(name)
    p = Path(path)
    if p.is_dir():
        if (p / MANIFEST).is_file():
            return ParquetSource(p)
        raise ExportError(f"{p}: a folder, but not a looptrace Parquet export (no {MANIFEST}). "
                          "Point --db at a store file or at a folder written by `looptrace export`.")
    return Store(p)
