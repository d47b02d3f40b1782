"""The DuckDB trace store: base tables, public views, migrations, segments. See docs/schema.md.

Names are imported on first use (``looptrace.tracer.lazy``): every command module reads
``DEFAULT_DB`` from here at start-up, and must not pay for pyarrow to do it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .errors import StoreError
    from .migrations import SCHEMA_VERSION
    from .segments import SegmentWriter, segments_dir
    from .store import Store, lockdown

DEFAULT_DB = "looptrace.duckdb"  # where every command looks when --db is not given

__all__ = ["DEFAULT_DB", "Store", "StoreError", "SegmentWriter", "SCHEMA_VERSION", "segments_dir", "lockdown"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "StoreError": ".errors",
    "SCHEMA_VERSION": ".migrations",
    "SegmentWriter": ".segments",
    "segments_dir": ".segments",
    "Store": ".store",
    "lockdown": ".store",
})
