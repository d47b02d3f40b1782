"""User SQL against a store: one statement, on a read-only, locked-down session.

The session cannot read or write files, attach databases, install or load extensions, or change
settings (see ``store.lockdown``). ``run_query`` runs it in a child process with a memory ceiling
and a deadline that kills it (``supervise.py``); ``session.execute`` is the part the child runs.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .result import DEFAULT_TIMEOUT, QueryError, QueryResult
from .supervise import run_supervised

if TYPE_CHECKING:
    from ..export.source import ParquetSource
    from ..store import Store

__all__ = ["QueryError", "QueryResult", "run_query", "check_single_statement", "DEFAULT_TIMEOUT",
           "DEFAULT_MEMORY_GB", "execute"]

DEFAULT_MEMORY_GB = 2.0


def run_query(
    store: Store | ParquetSource | str | os.PathLike[str], sql: str, *, limit: int | None = None,
    timeout: float = DEFAULT_TIMEOUT, memory_gb: float = DEFAULT_MEMORY_GB,
) -> QueryResult:
    """Run one statement in a supervised child: stopped past ``timeout`` seconds or ``memory_gb``.

    ``store`` may be a path (a store file or an export folder), opened in the child: the caller
    then never imports DuckDB, which is most of ``looptrace sql``'s start-up. The child refuses
    anything but one read-only statement (``session.execute``)."""
    _check_text(sql)
    source = os.fspath(store) if isinstance(store, (str, os.PathLike)) else store
    return run_supervised(source, sql, limit=limit, timeout=timeout, memory_gb=memory_gb)


def _check_text(sql: str) -> None:
    """Bytes that are not UTF-8 (a query saved in Latin-1, passed on the command line) reach Python as
    lone surrogates, which DuckDB's parser cannot take: say which byte, not DuckDB's TypeError."""
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        byte = sql[exc.start].encode("utf-8", "surrogateescape")
        shown = f"byte 0x{byte[0]:02x}" if len(byte) == 1 else f"character {sql[exc.start]!r}"
        raise QueryError(f"the query is not UTF-8 text ({shown} at character {exc.start + 1}); "
                         "save or type it as UTF-8") from None


def check_single_statement(sql: str) -> None:
    """A QueryError unless ``sql`` is exactly one read-only statement (imports DuckDB)."""
    from .session import check_single_statement as check

    check(sql)


def execute(conn: Any, sql: str, *, limit: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> QueryResult:
    """``session.execute``: one statement on an open, locked-down connection (imports DuckDB)."""
    from .session import execute as run

    return run(conn, sql, limit=limit, timeout=timeout)
