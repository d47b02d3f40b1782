"""User SQL against a store: one statement, on a read-only, locked-down session.

The session cannot read or write files, attach databases, install or load extensions, or change
settings (see ``store.lockdown``). ``run_query`` runs it in a child process with a memory ceiling
and a deadline that kills it (``supervise.py``); ``session.execute`` is the part the child runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .session import DEFAULT_TIMEOUT, QueryError, QueryResult, check_single_statement, execute
from .supervise import run_supervised

if TYPE_CHECKING:
    from ..export.source import ParquetSource
    from ..store import Store

__all__ = ["QueryError", "QueryResult", "run_query", "check_single_statement", "DEFAULT_TIMEOUT",
           "DEFAULT_MEMORY_GB", "execute"]

DEFAULT_MEMORY_GB = 2.0


def run_query(
    store: Store | ParquetSource, sql: str, *, limit: int | None = None, timeout: float = DEFAULT_TIMEOUT,
    memory_gb: float = DEFAULT_MEMORY_GB,
) -> QueryResult:
    """Run one statement in a supervised child: stopped past ``timeout`` seconds or ``memory_gb``."""
    check_single_statement(sql)
    return run_supervised(store, sql, limit=limit, timeout=timeout, memory_gb=memory_gb)
