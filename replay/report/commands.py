"""``looptrace report RUN_ID -o run.html`` and ``looptrace report --all -o DIR``: offline HTML reports."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.store import DEFAULT_DB

__all__ = ["register"]


def _report(args: argparse.Namespace) -> int:
    from looptrace.tracer.export.outputs import output_folder
    from looptrace.tracer.export.source import open_source
    from looptrace.tracer.store import StoreError
    from looptrace.tracer.store.backend import store_target

    from .write import ReportError, write_all, write_run

    if bool(args.run_id) == bool(args.all):
        print("error: give one RUN_ID, or --all for every run", file=sys.stderr)
        return 2
    if not args.catalog and not Path(args.db).exists():
        print(f"error: {args.db}: no such store", file=sys.stderr)
        return 1
    try:
        source = open_source(store_target(args))  # read only: a report writes nothing into the store
        if args.all:
            out = Path(args.output or "report")
            pages, size = write_all(source, out, label=f"catalog {args.catalog}" if args.catalog else str(args.db))
            print(f"{out / 'index.html'}: {pages} runs, {size / 1e6:.2f} MB in all")
        else:
            out = Path(args.output or f"{args.run_id}.html")
            if args.output and (args.output.endswith(("/", os.sep)) or out.is_dir()):
                # A folder (``-o reports/``): the page goes in it (the name alone was a file 'reports').
                with output_folder(out):  # made here, it goes again if the run is not found
                    out = out / f"{args.run_id}.html"
                    size = write_run(source, args.run_id, out)
            else:
                size = write_run(source, args.run_id, out)
            print(f"{out}: {size / 1e6:.2f} MB")
    except (ReportError, StoreError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "report", "Write a self-contained, offline HTML page of a run (or of every run, with "
                                   "an index): diagnosis, context growth, steps, redactions.",
                    "looptrace report RUN_ID --db demo.duckdb -o run.html\n"
                    "  looptrace report --all --db demo.duckdb -o report/")
    p.add_argument("run_id", nargs="?", metavar="RUN_ID", help="the run to report")
    p.add_argument("--db", default=DEFAULT_DB, help=f"store or Parquet export (default {DEFAULT_DB})")
    p.add_argument("--catalog", default=None, metavar="NAME",
                   help="report from an Iceberg catalog instead, read-only (docs/scale.md; needs the scale extra)")
    p.add_argument("--all", action="store_true", help="every run: index.html and one page per run in -o DIR")
    p.add_argument("-o", "--output", help="file to write (one run; default RUN_ID.html; a folder, or a name "
                                          "ending in /, gets RUN_ID.html in it) or folder (--all; default report/)")
    p.set_defaults(func=_report)
