"""One user statement on an open, locked-down session: refused unless it is one read-only
statement, interrupted at its time limit, its errors as one line. The query's child process runs
this; ``sql.run_query`` is what callers use."""

from __future__ import annotations

import threading
import time

import duckdb

from .result import DEFAULT_TIMEOUT, QueryError, QueryResult

__all__ = ["QueryError", "QueryResult", "check_single_statement", "execute", "DEFAULT_TIMEOUT"]

_READ_ONLY = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})


def check_single_statement(sql: str, conn: duckdb.DuckDBPyConnection | None = None) -> None:
    # On the session's own connection when there is one: ``duckdb.extract_statements`` parses on
    # DuckDB's default connection, a second database started for one parse (~30 ms CPU of every
    # ``looptrace sql``, ``make bench`` cli_startup).
    try:
        statements = (conn or duckdb).extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from exc
    if len(statements) != 1:
        raise QueryError(f"expected exactly one SQL statement, got {len(statements)}")
    kind = statements[0].type
    if kind not in _READ_ONLY:
        raise QueryError(f"only queries are allowed (SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN), not {kind.name}")


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text.split(" LINE 1:")[0]


def execute(
    conn: duckdb.DuckDBPyConnection, sql: str, *, limit: int | None = None, timeout: float = DEFAULT_TIMEOUT
) -> QueryResult:
    """Run one statement on an open (locked-down) session, fetching at most ``limit`` rows."""
    check_single_statement(sql, conn)
    timer = threading.Timer(timeout, conn.interrupt)
    timer.daemon = True
    started = time.perf_counter()
    timer.start()
    try:
        cursor = conn.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(limit + 1) if limit is not None else cursor.fetchall()
    except duckdb.InterruptException as exc:
        raise QueryError(f"query stopped: over the {timeout:g} s time limit; add a LIMIT or a WHERE") from exc
    except duckdb.OutOfMemoryException as exc:
        raise QueryError(f"query stopped: out of memory ({_one_line(exc)})") from exc
    except duckdb.Error as exc:
        raise QueryError(_one_line(exc)) from exc
    finally:
        timer.cancel()
    truncated = limit is not None and len(rows) > limit
    return QueryResult(columns, rows[:limit] if truncated else rows, truncated, time.perf_counter() - started)
