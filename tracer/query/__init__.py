"""User SQL: one read-only, locked-down query over a store or a Parquet export (``looptrace sql`` and
the viewer's SQL screen run it the same way)."""

from __future__ import annotations

from .sql import QueryError, QueryResult, run_query

__all__ = ["QueryError", "QueryResult", "run_query"]
