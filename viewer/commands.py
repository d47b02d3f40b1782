"""``looptrace view [PATH]``: registered without importing Textual (it is imported when the command runs)."""

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
    from .app import ViewerApp

    ViewerApp(path, refresh_seconds=args.refresh or None).run()
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "view", "Browse a store in the terminal: runs, steps, diagnoses, replay, SQL; live.",
                    "looptrace view demo.duckdb")
    p.add_argument("path", nargs="?", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    p.add_argument("--refresh", type=float, default=2.0,
                   help="seconds between live refreshes (default 2; 0 turns them off)")
    p.set_defaults(func=_view)
