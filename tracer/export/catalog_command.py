"""``looptrace export --db STORE --catalog NAME``: the command side of ``catalog.py``."""

from __future__ import annotations

import argparse
import sys

__all__ = ["export_to_catalog"]


def export_to_catalog(args: argparse.Namespace) -> int:
    from ..cli.plural import count
    from ..cli.progress import Progress
    from ..store import StoreError
    from ..store.iceberg import CatalogStore
    from .catalog import export_catalog

    catalog = CatalogStore(args.catalog)
    try:
        with Progress(f"exporting {args.db} into catalog {args.catalog}") as progress:
            report = export_catalog(args.db, catalog, on_chunk=lambda done, total: progress.advance())
    except (StoreError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = sum(report.rows.values())
    print(f"exported {count(report.runs, 'run')} ({count(rows, 'row')}) into catalog {args.catalog} in "
          f"{report.seconds:.1f}s; {count(report.present, 'run')} already there")
    if rows:
        print("rows: " + ", ".join(f"{t} {n}" for t, n in report.rows.items() if n))
    if report.repaired:
        print(f"{count(report.repaired, 'run')} left in part by an interrupted export: copied again whole")
    if report.waiting:
        print(f"{count(report.waiting, 'run')} still running: a later export takes them")
    return 0
