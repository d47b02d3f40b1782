"""User SQL: one read-only, locked-down query over a store or a Parquet export (``looptrace sql`` and
the viewer's SQL screen run it the same way).

Names are imported on first use (``looptrace.tracer.lazy``): loading the ``sql`` command to list it
must not load DuckDB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .sql import QueryError, QueryResult, run_query

__all__ = ["QueryError", "QueryResult", "run_query"]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, ".sql"))
