"""``looptrace sql``: one read-only query over a store or a Parquet export of one."""

from __future__ import annotations

import argparse
import sys

from ..cli.main import add_command
from ..cli.numbers import positive, whole  # a timeout or memory cap of 0, inf or nan would leave a query unbounded
from ..store import DEFAULT_DB
from ..store.backend import add_catalog_option

__all__ = ["register"]


def _sql(args: argparse.Namespace) -> int:
    from ..store.backend import store_target
    from .sql import QueryError, run_query

    try:
        # The path, not an opened store: the child opens it (and reports a bad one), so this
        # process never imports DuckDB (``make bench`` cli_startup).
        result = run_query(store_target(args), args.query, limit=args.limit, timeout=args.timeout,
                           memory_gb=args.memory)
    except QueryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    from ..cli.table import write_rows

    write_rows(sys.stdout, result.columns, result.rows, args.format, full=args.full)
    if result.truncated:
        print(f"(stopped at --limit {args.limit}; more rows exist)", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "sql", "Run one read-only SQL query against a store (views: runs, steps, tool_calls, llm_calls, "
        "diagnoses, spans).", f'looptrace sql --db {DEFAULT_DB} "SELECT status, count(*) FROM runs GROUP BY 1"',
    )
    p.add_argument("query", help="one SQL statement")
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path or Parquet export folder (default {DEFAULT_DB})")
    add_catalog_option(p, reads=True)
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="table (long values wrap inside their column), csv or json (default table)")
    p.add_argument("--full", action="store_true",
                   help="in a table, print every value whole (by default one is cut after 500 characters)")
    p.add_argument("--limit", type=whole(0), default=None, help="print at most this many rows")
    p.add_argument("--timeout", type=positive, default=30.0,
                   help="stop the query after this many seconds (default 30)")
    p.add_argument("--memory", type=positive, default=2.0,
                   help="stop the query past this many GB of memory (default 2)")
    p.set_defaults(func=_sql)
