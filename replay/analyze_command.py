"""``looptrace analyze``: fill ``diagnoses`` and print each run's primary label with its evidence."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, fields

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.store import DEFAULT_DB

__all__ = ["register"]


def _analyze(args: argparse.Namespace) -> int:
    from looptrace.tracer.export.source import open_source
    from looptrace.tracer.store import Store, StoreError
    from looptrace.tracer.cli.progress import Progress
    from looptrace.tracer.cli.table import format_table

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
    if args.json:
        json.dump([{"run_id": r.run_id, "status": r.status, "diagnoses": [asdict(d) for d in r.diagnoses]}
                   for r in results], sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    rows = []
    for r in results:
        p = r.primary
        rows.append([r.run_id[:12], r.status, p.label if p else "(none)",
                     ", ".join(d.label for d in r.diagnoses[1:]),
                     f"{p.first_step}-{p.last_step}" if p and p.first_step is not None else "",
                     p.explanation if p else "no rule explains how this run ended"])
    print(format_table(["run", "status", "primary", "secondary", "steps", "explanation"], rows, max_cell=70))
    counts: dict[str, int] = {}
    for r in results:
        key = r.primary.label if r.primary else "(none)"
        counts[key] = counts.get(key, 0) + 1
    print(f"{len(results)} runs analysed: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .analyzer.thresholds import DEFAULT_THRESHOLDS, Thresholds

    p = add_command(sub, "analyze", "Diagnose runs (stagnation, context_bomb, cap_hit, hallucinated_tool, ok) with "
                    "the steps that prove it; fills the diagnoses table.",
                    f"looptrace analyze --db {DEFAULT_DB} --repeat-min 4")
    p.add_argument("--db", default=DEFAULT_DB, help="store path, or a Parquet export folder (read, not written)")
    p.add_argument("--run", default=None, help="analyse one run (default: all)")
    p.add_argument("--json", action="store_true", help="print the diagnoses as JSON")
    p.add_argument("--config", default=None, help="a TOML file with an [analyzer] table of thresholds")
    p.add_argument("--otlp-endpoint", default=None, metavar="URL",
                   help="also send the diagnoses as gen_ai.evaluation.result events to this OTLP/HTTP endpoint")
    thresholds = p.add_argument_group("thresholds (defaults shown; see docs/analyzer.md)")
    for f in fields(Thresholds):
        default = getattr(DEFAULT_THRESHOLDS, f.name)
        thresholds.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=type(default), default=None,
                                help=f"default {default}")
    p.set_defaults(func=_analyze)
