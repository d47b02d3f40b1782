"""What a user query answers, and how it fails: plain types with no DuckDB behind them, so the
process that only supervises a query (the ``looptrace sql`` command, the viewer) never imports
DuckDB for them; the query's own process does (``session.py``)."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["QueryError", "QueryResult", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 30.0


class QueryError(Exception):
    """The query was refused or failed; the message is one line for the user."""


class QueryResult(NamedTuple):  # not a dataclass: ``dataclasses`` imports ``inspect``, a start-up cost
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool  # more rows existed than ``limit``
    seconds: float
