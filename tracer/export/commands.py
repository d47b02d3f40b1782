"""``looptrace export``: write a store as partitioned Parquet, all of it or what is new since last time."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli.main import add_command
from ..store import DEFAULT_DB

__all__ = ["register"]


def _export(args: argparse.Namespace) -> int:
    if bool(args.parquet) == bool(args.catalog):
        print("error: give one of --parquet DIR or --catalog NAME", file=sys.stderr)
        return 2
    if args.catalog:
        from .catalog_command import export_to_catalog

        return export_to_catalog(args)
    from ..store import StoreError

    from ..cli.progress import Progress
    from .outputs import output_folder
    from .parquet import PARTITIONS, export_parquet, parse_since

    try:
        since = parse_since(args.since) if args.since else None
        with Progress(f"exporting {args.db}", total=len(PARTITIONS)) as progress, \
                output_folder(Path(args.parquet)):  # a folder made for a failed export goes again
            report = export_parquet(args.db, args.parquet, since=since, on_table=lambda _: progress.advance())
    except (StoreError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rate = report.total_rows / report.seconds if report.seconds else 0.0
    from ..cli.plural import count

    runs = count(report.runs, "run")
    print(f"exported {runs} ({count(report.total_rows, 'row')}, {count(report.files, 'file')}, "
          f"{report.bytes / 1e6:.1f} MB) to "
          f"{report.folder} in {report.seconds:.2f}s ({rate:,.0f} rows/s)")
    print("rows: " + ", ".join(f"{t} {n}" for t, n in report.rows.items() if n))
    if report.waiting:
        print(f"{report.waiting} run{'s are' if report.waiting != 1 else ' is'} still running: a later "
              "export with --since auto takes them")
    print(f"high-water mark {report.high_water.isoformat(sep=' ')} UTC; add what is new later with:\n"
          f"  looptrace export --db {args.db} --parquet {args.parquet} --since auto")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "export", "Write the store as Parquet partitioned by table, day and agent (docs/parquet.md); "
        "`looptrace sql` and `looptrace analyze` read the folder like a store; or copy it into an Iceberg catalog.",
        f"looptrace export --db {DEFAULT_DB} --parquet traces-parquet/ --since auto",
    )
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    p.add_argument("--parquet", default=None, metavar="DIR", help="export folder (created if missing)")
    p.add_argument("--catalog", default=None, metavar="NAME",
                   help="copy the store's finished runs into this Iceberg catalog instead (idempotent: runs "
                   "already there are skipped); needs the scale extra (docs/scale.md)")
    p.add_argument("--since", default=None, metavar="TIMESTAMP|auto",
                   help="only runs ready at or after this UTC time; 'auto': since the folder's last export. "
                   "Runs already in the folder are never written twice.")
    p.set_defaults(func=_export)
