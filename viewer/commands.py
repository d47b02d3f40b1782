"""``looptrace view [PATH] [--web]``: registered without importing Textual (it is imported when the command runs)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.cli.numbers import port, seconds
from looptrace.tracer.store import DEFAULT_DB, StoreError

__all__ = ["register"]


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be viewed (one line), or None. Checked before the terminal is taken over,
    so a foreign, damaged or missing file gets one line on stderr, not a traceback or a broken screen."""
    import duckdb

    from looptrace.tracer.export.source import open_source

    if path.is_file() and _foreign_duckdb(path):
        return (f"{path}: a DuckDB database, but not a looptrace store (no schema_migrations table); "
                "it was not changed")
    try:
        with open_source(path).reader(locked_down=True) as conn:
            conn.execute("SELECT count(*) FROM runs").fetchone()
    except StoreError as exc:  # ExportError is one too
        return " ".join(str(exc).split())
    except duckdb.Error as exc:  # a file that attaches but is not a looptrace store (no such views)
        return f"{path}: not a readable looptrace store ({' '.join(str(exc).split())[:200]})"
    return None


def _unreadable_catalog(target: str) -> str | None:
    """Why a catalog cannot be viewed (one line), or None. Viewed read-only: nothing is analysed into it."""
    from looptrace.tracer.export.source import open_source

    try:
        with open_source(target).reader(locked_down=True) as conn:
            conn.execute("SELECT count(*) FROM runs").fetchall()
    except StoreError as exc:
        return " ".join(str(exc).split())
    return None


def _foreign_duckdb(path: Path) -> bool:
    """A DuckDB file with tables but no looptrace schema: opening it as a store would migrate it."""
    import duckdb

    conn = duckdb.connect(config={"autoinstall_known_extensions": False, "autoload_known_extensions": False})
    try:
        conn.execute(f"ATTACH '{str(path).replace(chr(39), chr(39) * 2)}' AS probe (READ_ONLY)")
        names = {r[0] for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'probe'").fetchall()}
    except duckdb.Error:
        return False  # not DuckDB at all, or busy: the store's own open says why
    finally:
        conn.close()
    return bool(names) and "schema_migrations" not in names


def _view(args: argparse.Namespace) -> int:
    from looptrace.tracer.store.backend import catalog_name, catalog_target

    if args.catalog:
        args.path = catalog_target(args.catalog)  # iceberg:NAME, also what --web's child is given
    path = Path(args.path)
    if catalog_name(args.path) is None and not path.exists():
        from looptrace.tracer.cli.program import program

        print(f"error: {path}: no such store (create one with: {program()} demo --db {shlex.quote(str(path))})",
              file=sys.stderr)
        return 1
    problem = _unreadable(path) if catalog_name(args.path) is None else _unreadable_catalog(args.path)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 1
    if args.web:
        from .web import CannotServe, serve

        try:
            serve(path, host=args.host, port=args.port, refresh=args.refresh)
        except CannotServe as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0
    from .app import ViewerApp

    ViewerApp(path, refresh_seconds=args.refresh or None).run()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "view", "Browse a store in the terminal (or, with --web, in a browser): runs, steps, "
                                 "diagnoses, replay, SQL, search, usage; live.",
                    "looptrace view demo.duckdb\n"
                    "  looptrace view demo.duckdb --web --port 8008   (then open http://127.0.0.1:8008)")
    p.add_argument("path", nargs="?", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    p.add_argument("--catalog", default=None, metavar="NAME",
                   help="view an Iceberg catalog instead, read-only (docs/scale.md; needs the scale extra)")
    p.add_argument("--refresh", type=seconds(0.1, off=True), default=2.0,
                   help="seconds between live refreshes (default 2; 0 turns them off; at least 0.1)")
    p.add_argument("--web", action="store_true",
                   help="serve the same viewer in a browser (textual-serve), at http://HOST:PORT")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on with --web (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=port, default=8008, help="port to serve on with --web (default 8008)")
    p.set_defaults(func=_view)
