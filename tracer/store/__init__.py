"""The DuckDB trace store: base tables, public views, migrations, segments. See docs/schema.md."""

from __future__ import annotations

from .errors import StoreError
from .migrations import SCHEMA_VERSION
from .segments import SegmentWriter, segments_dir
from .store import Store, lockdown

DEFAULT_DB = "looptrace.duckdb"  # where every command looks when --db is not given

__all__ = ["DEFAULT_DB", "Store", "StoreError", "SegmentWriter", "SCHEMA_VERSION", "segments_dir", "lockdown"]
