"""``looptrace compact``: absorb pending segments into the DuckDB file, or compact a catalog's small files."""

from __future__ import annotations

import argparse
import sys

from ..cli.main import add_command
from . import DEFAULT_DB

__all__ = ["register"]


def _compact(args: argparse.Namespace) -> int:
    from ..cli.progress import Progress
    from . import Store, StoreError

    if args.catalog:
        return _compact_catalog(args.catalog)

    from pathlib import Path

    from .wholeness import check_whole

    try:
        # Compaction with nothing pending reads no block: a truncated file would be "compacted".
        check_whole(Path(args.db))
        with Progress(f"compacting {args.db}"):
            n = Store(args.db).compact()
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"absorbed {n} segment{'s' if n != 1 else ''} into {args.db}")
    return 0


def _compact_catalog(name: str) -> int:
    from ..cli.progress import Progress
    from . import StoreError
    from .iceberg import CatalogStore
    from .iceberg.compact import compact_catalog

    try:
        with Progress(f"compacting catalog {name}"):
            report = compact_catalog(CatalogStore(name))
    except StoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    before, after = sum(report.files_before.values()), sum(report.files_after.values())
    print(f"compacted catalog {name}: {before} data files -> {after} "
          f"({report.partitions_rewritten} partitions rewritten)")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "compact", "Absorb pending segment files into the DuckDB file.", f"looptrace compact --db {DEFAULT_DB}"
    )
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--catalog", default=None, metavar="NAME",
                   help="instead: rewrite each partition's small data files of this Iceberg catalog as one "
                   "(docs/scale.md)")
    p.set_defaults(func=_compact)
