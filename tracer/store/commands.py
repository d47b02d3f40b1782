"""``looptrace compact``: absorb pending segments into the DuckDB file."""

from __future__ import annotations

import argparse
import sys

from ..cli.main import add_command
from . import DEFAULT_DB

__all__ = ["register"]


def _compact(args: argparse.Namespace) -> int:
    from ..cli.progress import Progress
    from . import Store, StoreError

    try:
        with Progress(f"compacting {args.db}"):
            n = Store(args.db).compact()
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"absorbed {n} segment{'s' if n != 1 else ''} into {args.db}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "compact", "Absorb pending segment files into the DuckDB file.", f"looptrace compact --db {DEFAULT_DB}"
    )
    p.add_argument("--db", default=DEFAULT_DB)
    p.set_defaults(func=_compact)
