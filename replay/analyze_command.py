"""``looptrace analyze``: fill ``diagnoses`` and print each run's primary label with its evidence
(analyze_output.py formats it)."""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import shutil
import sys
import time
from dataclasses import fields
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.store import DEFAULT_DB

if TYPE_CHECKING:
    from .partitioned import EngineRun

__all__ = ["register"]


def _analyze(args: argparse.Namespace) -> int:
    from looptrace.tracer.store import Store, StoreError

    if args.ray and not args.catalog:
        print("error: --ray analyses an Iceberg catalog's partitions: give --catalog NAME", file=sys.stderr)
        return 2
    if args.ray and not args.run:
        # First, before this command's own imports (DuckDB, pyarrow, the analyzer, pyiceberg): the
        # cluster's workers start while this process imports, opens the catalog and plans (on_ray.py).
        from .on_ray import connect

        try:
            connect(args.ray)
        except (StoreError, ValueError, OSError) as exc:  # as the analysis's own errors below
            print(f"error: {exc}", file=sys.stderr)
            return 1

    from looptrace.tracer.export.source import open_source
    from looptrace.tracer.cli.progress import Progress
    from looptrace.tracer.store.backend import store_target

    from .analyze_output import csv_text, json_text, rows_for, summary, table
    from .analyzer import analyze_store, load_thresholds
    from .analyzer.thresholds import Thresholds

    ends: dict[str, float] = {}  # when the summary was printed, the diagnoses written (--timeline)
    runs: dict[str, tuple[str | None, datetime | None]] | None = None
    try:
        thresholds = load_thresholds(args.config, **{f.name: getattr(args, f.name) for f in fields(Thresholds)})
        source = open_source(store_target(args))  # a Parquet export is analysed without writing diagnoses
        if args.catalog and not args.run:
            from concurrent.futures import Future, ThreadPoolExecutor

            from .partitioned import analyze_catalog

            # Each run's agent and start are read in a thread of their own while the diagnoses are
            # written (both mostly in DuckDB, pyarrow and the catalog's database, outside the GIL), from
            # a catalog object of its own, so the command's end waits for the longer of the two.
            read: list[Future[dict[str, tuple[str | None, datetime | None]]]] = []
            with ThreadPoolExecutor(1, thread_name_prefix="looptrace-runs") as pool:
                def ran(run: EngineRun) -> None:
                    _ran(run, args.timeline, ends)
                    read.append(pool.submit(_agents_and_starts, type(source)(args.catalog), CATALOG_RUNS))

                results = analyze_catalog(source, ray=args.ray, thresholds=thresholds,  # type: ignore[arg-type]
                                          on_partition=_partition_done, on_run=ran)
                ends["written"] = time.perf_counter()
                runs = read[0].result() if read else None
        else:
            run_ids = None
            if args.run:  # a unique prefix names a run here as in every other command
                from .recording import RecordingError, resolve_run

                with source.reader() as conn:
                    try:
                        run_ids = [resolve_run(conn, args.run)]
                    except RecordingError as exc:
                        raise ValueError(str(exc)) from None
            with Progress(f"analysing {args.db}"):  # a spinner on a terminal past a second; quiet otherwise
                results = analyze_store(source, run_ids=run_ids, thresholds=thresholds,
                                        write=isinstance(source, Store) or bool(args.catalog))
    except (StoreError, ValueError, OSError, ConnectionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.otlp_endpoint:
        from .evaluation_logs import send_and_report

        send_and_report(source, results, args.otlp_endpoint, sys.stderr, span_events=args.evaluation_span_events)
    if runs is None:
        runs = _agents_and_starts(source, CATALOG_RUNS if args.catalog else None)
    rows = rows_for(results, runs)
    # At its exit Python collects every object still alive (the analysis made hundreds of thousands):
    # 0.35 s of a 400,000-step command on a quiet machine, more under load. Nothing of them needs a
    # finalizer, so they are moved out of the collector's sight when the interpreter exits (atexit:
    # a caller in the same process, a test, keeps a working collector until then).
    atexit.register(gc.freeze)
    fmt = "json" if args.json else args.format
    if fmt == "json":
        sys.stdout.write(json_text(rows))
    elif fmt == "csv":
        sys.stdout.write(csv_text(rows))
    else:
        if rows:
            print(table(rows, full=args.full, width=shutil.get_terminal_size((120, 24)).columns))
        print(summary(rows))
    if args.timeline and "written" in ends:
        _after_summary(Path(args.timeline), ends)
    return 0


# What each run's agent and start are read from in a catalog: run_records alone (a session over every
# table, the runs view's step totals included, took 0.4 s at 400,000 steps, as long as the diagnoses write).
CATALOG_RUNS = ("run_records",)


def _agents_and_starts(source: Any, tables: tuple[str, ...] | None) -> dict[str, tuple[str | None, datetime | None]]:
    """Each run's agent and start, for the output's rows (``tables``: what a catalog session reads)."""
    with source.reader(**({"tables": tables} if tables else {})) as conn:
        return {run_id: (agent, started) for run_id, agent, started in
                conn.execute("SELECT run_id, agent, started_at FROM runs").fetchall()}


def _ran(run: EngineRun, timeline: str | None, ends: dict[str, float]) -> None:
    """The one line that says where and how the analysis ran; with --timeline, each task's as JSON.
    Done with Ray then: the command lets go of the cluster while it writes the diagnoses."""
    if run.engine == "ray":
        from .on_ray import let_go

        let_go()
    print(run.summary(), file=sys.stderr, flush=True)
    if timeline:
        Path(timeline).write_text(json.dumps(run.as_json(), indent=1) + "\n")
    ends["summary"] = time.perf_counter()


def _after_summary(timeline: Path, ends: dict[str, float]) -> None:
    """The timeline's figures of what came after the summary line: the diagnoses written (one Iceberg
    overwrite, the same on every engine; each run's agent and start are read beside it), then the output."""
    run = json.loads(timeline.read_text())
    run["after_summary"] = {"diagnoses_written_s": ends["written"] - ends["summary"],
                            "output_s": time.perf_counter() - ends["written"]}
    timeline.write_text(json.dumps(run, indent=1) + "\n")


def _partition_done(done: int, total: int, runs: int) -> None:
    """Progress as partitions finish: one line each on stderr (the table or JSON stays on stdout)."""
    print(f"partition {done}/{total} done ({runs} runs)", file=sys.stderr, flush=True)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from looptrace.tracer.cli.numbers import number, whole

    from .analyzer.thresholds import DEFAULT_THRESHOLDS, Thresholds

    p = add_command(sub, "analyze", "Diagnose runs (stagnation, context_bomb, cap_hit, hallucinated_tool; else ok, error or incomplete) with "
                    "the steps that prove it; fills the diagnoses table.",
                    f"looptrace analyze --db {DEFAULT_DB} --repeat-min 4")
    p.add_argument("--db", default=DEFAULT_DB, help="store path, or a Parquet export folder (read, not written)")
    p.add_argument("--catalog", default=None, metavar="NAME",
                   help="analyse an Iceberg catalog partition by partition instead, writing its diagnoses "
                   "(docs/scale.md; needs the scale extra)")
    p.add_argument("--ray", default=None, metavar="ADDRESS|auto",
                   help="with --catalog: one Ray task per partition on this cluster ('auto': RAY_ADDRESS or the "
                   "cluster running here); without it, one process")
    p.add_argument("--timeline", default=None, metavar="FILE",
                   help="with --catalog: write how the analysis ran to FILE as JSON, with each Ray task's timeline "
                   "(worker start, task start and end, CPU, result received; docs/scale.md)")
    p.add_argument("--run", default=None, help="analyse one run (default: all)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="a table sorted by run start (default), CSV, or JSON with every diagnosis")
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument("--full", action="store_true",
                   help="whole run ids, the whole explanation and the secondary labels in the table")
    p.add_argument("--config", default=None, help="a TOML file with an [analyzer] table of thresholds")
    p.add_argument("--otlp-endpoint", default=None, metavar="URL",
                   help="also send the diagnoses as gen_ai.evaluation.result log records (OTLP logs, tied to each "
                   "run's span) to this OTLP/HTTP endpoint")
    p.add_argument("--evaluation-span-events", action="store_true",
                   help="with --otlp-endpoint: send them as span events instead (one span per run), for backends "
                   "that take no logs")
    thresholds = p.add_argument_group("thresholds (defaults shown; see docs/analyzer.md)")
    for f in fields(Thresholds):
        default = getattr(DEFAULT_THRESHOLDS, f.name)
        kind = whole(0) if isinstance(default, int) else number(0)
        thresholds.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=None,
                                help=f"default {default}")
    p.set_defaults(func=_analyze)
