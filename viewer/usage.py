"""Where the tokens and the money went: the roll-up views, read for the usage screen (no Textual).

The SQL is fixed text over the documented views ``usage_by_agent``, ``usage_by_model`` and
``usage_by_day`` (docs/schema.md), run through the same locked-down path as the SQL screen.
"""

from __future__ import annotations

from looptrace.tracer.query.sql import QueryResult, run_query
from looptrace.tracer.store import Store

__all__ = ["USAGE_GROUPS", "USAGE_LIMIT", "load_usage"]

USAGE_GROUPS = ("agent", "model", "day")
USAGE_LIMIT = 200  # rows of one roll-up

_USAGE_SQL = {
    by: f"SELECT * FROM usage_by_{by} ORDER BY cost_usd DESC NULLS LAST, tokens DESC NULLS LAST, {by}"
    for by in USAGE_GROUPS
}


def load_usage(store: Store, *, limit: int = USAGE_LIMIT) -> list[tuple[str, QueryResult]]:
    """Each roll-up (by agent, by model, by day), most expensive first; unknown costs stay None."""
    return [(by, run_query(store, sql, limit=limit, timeout=30.0)) for by, sql in _USAGE_SQL.items()]
