"""``looptrace analyze``: fill ``diagnoses`` and print each run's primary label with its evidence
(analyze_output.py formats it)."""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import fields

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.store import DEFAULT_DB

__all__ = ["register"]


def _analyze(args: argparse.Namespace) -> int:
    from looptrace.tracer.export.source import open_source
    from looptrace.tracer.store import Store, StoreError
    from looptrace.tracer.cli.progress import Progress

    from .analyze_output import csv_text, json_text, rows_for, summary, table
    from .analyzer import analyze_store, load_thresholds
    from .analyzer.thresholds import Thresholds

    try:
        thresholds = load_thresholds(args.config, **{f.name: getattr(args, f.name) for f in fields(Thresholds)})
        source = open_source(args.db)  # a Parquet export is analysed without writing diagnoses
        with Progress(f"analysing {args.db}"):  # a spinner on a terminal past a second; quiet otherwise
            results = analyze_store(source, run_ids=[args.run] if args.run else None, thresholds=thresholds,
                                    write=isinstance(source, Store))
    except (StoreError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.otlp_endpoint:
        from .evaluation import send_and_report

        send_and_report(source, results, args.otlp_endpoint, sys.stderr)
    with source.reader() as conn:
        runs = {run_id: (agent, started) for run_id, agent, started in
                conn.execute("SELECT run_id, agent, started_at FROM runs").fetchall()}
    rows = rows_for(results, runs)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        sys.stdout.write(json_text(rows))
    elif fmt == "csv":
        sys.stdout.write(csv_text(rows))
    else:
        if rows:
            print(table(rows, full=args.full, width=shutil.get_terminal_size((120, 24)).columns))
        print(summary(rows))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .analyzer.thresholds import DEFAULT_THRESHOLDS, Thresholds

    p = add_command(sub, "analyze", "Diagnose runs (stagnation, context_bomb, cap_hit, hallucinated_tool; else ok, error or incomplete) with "
                    "the steps that prove it; fills the diagnoses table.",
                    f"looptrace analyze --db {DEFAULT_DB} --repeat-min 4")
    p.add_argument("--db", default=DEFAULT_DB, help="store path, or a Parquet export folder (read, not written)")
    p.add_argument("--run", default=None, help="analyse one run (default: all)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="a table sorted by run start (default), CSV, or JSON with every diagnosis")
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument("--full", action="store_true",
                   help="whole run ids, the whole explanation and the secondary labels in the table")
    p.add_argument("--config", default=None, help="a TOML file with an [analyzer] table of thresholds")
    p.add_argument("--otlp-endpoint", default=None, metavar="URL",
                   help="also send the diagnoses as gen_ai.evaluation.result events to this OTLP/HTTP endpoint")
    thresholds = p.add_argument_group("thresholds (defaults shown; see docs/analyzer.md)")
    for f in fields(Thresholds):
        default = getattr(DEFAULT_THRESHOLDS, f.name)
        thresholds.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(default), default=None,
                                help=f"default {default}")
    p.set_defaults(func=_analyze)
