"""``looptrace view [PATH] [--web]``: registered without importing Textual (it is imported when the command runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.store import DEFAULT_DB

__all__ = ["register"]


def _view(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"error: {path}: no such store (create one with: looptrace demo --db {path})", file=sys.stderr)
        return 1
    if args.web:
        from .web import serve

        serve(path, host=args.host, port=args.port, refresh=args.refresh)
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
    p.add_argument("--refresh", type=float, default=2.0,
                   help="seconds between live refreshes (default 2; 0 turns them off)")
    p.add_argument("--web", action="store_true",
                   help="serve the same viewer in a browser (textual-serve), at http://HOST:PORT")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on with --web (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8008, help="port to serve on with --web (default 8008)")
    p.set_defaults(func=_view)
