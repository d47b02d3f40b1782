"""The Iceberg catalog backend: the store's tables as Apache Iceberg tables, through pyiceberg.

Many processes on many machines append to one catalog at once (an Iceberg commit is atomic, and a
commit that lost a race is retried on the fresh table); DuckDB, Spark, Trino or Ray read the same
tables. Needs the ``scale`` extra. See docs/scale.md.

Names are imported on first use: pyiceberg is only loaded by a command that names a catalog.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy import lazy_exports

if TYPE_CHECKING:
    from .catalog import CatalogStore, load_catalog
    from .errors import CatalogError, CatalogUnavailable
    from .layout import NAMESPACE, PARTITION_BUCKETS

__all__ = ["CatalogStore", "CatalogError", "CatalogUnavailable", "load_catalog", "NAMESPACE", "PARTITION_BUCKETS"]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("CatalogStore", "load_catalog"), ".catalog"),
    **dict.fromkeys(("CatalogError", "CatalogUnavailable"), ".errors"),
    **dict.fromkeys(("NAMESPACE", "PARTITION_BUCKETS"), ".layout"),
})
