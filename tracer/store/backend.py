"""The storage seam: one store interface, two backends (a DuckDB file, an Iceberg catalog).

Everything above the store talks to a *target*: a DuckDB file's path, or ``iceberg:NAME`` for the
Iceberg catalog NAME configured the pyiceberg way (``.pyiceberg.yaml``, or
``PYICEBERG_CATALOG__NAME__URI`` and ``__WAREHOUSE``). A target is a plain string so it travels
unchanged through every command, source and hook that already passes ``--db`` along (the sink, the
receiver, the importers, ``open_source``); the backend is chosen where the store is opened:

- ``Sink(target)`` writes a batch through a ``RowWriter``: segment files beside a DuckDB file
  (``SegmentWriter``), or appends to the catalog's Iceberg tables (``iceberg.CatalogStore``).
- ``open_source(target).reader()`` is a DuckDB session whose base tables are the store's (the file,
  or the Iceberg tables' data files) with the documented views on top: the same SQL over both.

``--catalog NAME`` on a command is ``--db iceberg:NAME`` (``store_target``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # annotations only: the query child imports this module and does not parse arguments
    import argparse

__all__ = [
    "CATALOG_SCHEME", "RowWriter", "StoreReader", "catalog_name", "catalog_target", "add_catalog_option",
    "store_target",
]

CATALOG_SCHEME = "iceberg:"


class RowWriter(Protocol):
    """What the sink writes through: one batch of rows by table, seen whole or not at all per table."""

    def write(self, rows: Mapping[str, Any]) -> str | None: ...


class StoreReader(Protocol):
    """What readers open: a DuckDB session with the base tables and the documented views."""

    def reader(self, *, locked_down: bool = True, **options: Any) -> AbstractContextManager[Any]: ...


def catalog_target(name: str) -> str:
    return f"{CATALOG_SCHEME}{name}"


def catalog_name(target: str | os.PathLike[str]) -> str | None:
    """The catalog a target names, or None for a DuckDB file (or Parquet export) path."""
    text = os.fspath(target)
    return text[len(CATALOG_SCHEME):] if isinstance(text, str) and text.startswith(CATALOG_SCHEME) else None


def add_catalog_option(parser: argparse.ArgumentParser, *, reads: bool) -> None:
    what = "read (never written)" if reads else "write into"
    parser.add_argument(
        "--catalog", default=None, metavar="NAME",
        help=f"an Iceberg catalog to {what} instead of --db, configured the pyiceberg way (.pyiceberg.yaml "
        "or PYICEBERG_CATALOG__NAME__URI / __WAREHOUSE); needs the scale extra (docs/scale.md)")


def store_target(args: argparse.Namespace) -> str:
    """``--catalog NAME`` as a target, else ``--db``."""
    name = getattr(args, "catalog", None)
    return catalog_target(name) if name else os.fspath(args.db)
