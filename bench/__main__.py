"""``python -m bench [NAME ...] [--quick] [--json PATH]``: run the benchmarks and print their tables.

Exit status is 0 whatever the figures say (a MISS is information, not a failure); it is 1 only if a
benchmark crashed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from importlib.metadata import version
from types import ModuleType
from typing import Any

from .results import as_json, format_table

BENCHMARKS = (
    "instrumentor", "tracer_overhead", "store_write", "burst", "server_latency", "importer", "analyzer",
    "replay_speed", "viewer_speed", "receiver", "collect_load", "live_runs", "search_speed", "redaction", "cli_startup",
    "ray_analysis", "log_lag",
    "timings",  # the timing claims the tests no longer assert with tight wall-clock bounds
)


def _machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "duckdb": version("duckdb"),
        "opentelemetry-sdk": version("opentelemetry-sdk"),
        "pyarrow": version("pyarrow"),
        "anthropic": version("anthropic"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: {', '.join(BENCHMARKS)})"
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a fast look")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")

    machine = _machine()
    started = datetime.now(timezone.utc)
    print(f"looptrace benchmarks  {started:%Y-%m-%d %H:%M UTC}{'  (quick)' if args.quick else ''}")
    print("  ".join(f"{k} {v}" for k, v in machine.items()))
    print("ratio = looptrace / baseline; medians of alternating rounds measured in this one run")

    report: dict[str, Any] = {
        "date": started.isoformat(), "quick": args.quick, "machine": machine, "benchmarks": {}
    }
    crashed = False
    for name in args.names or BENCHMARKS:
        module: ModuleType = importlib.import_module(f"bench.{name}")
        print()
        t0 = time.perf_counter()
        try:
            results = module.run(quick=args.quick)
        except Exception:  # noqa: BLE001 - report the crash, still run the others
            crashed = True
            print(f"{module.TITLE}\nCRASHED:", file=sys.stderr)
            traceback.print_exc()
            report["benchmarks"][name] = {"crashed": traceback.format_exc()}
            continue
        elapsed = time.perf_counter() - t0
        print(format_table(module.TITLE, results))
        print(f"  ({elapsed:.1f} s)")
        report["benchmarks"][name] = {"seconds": elapsed, "results": [as_json(r) for r in results]}
        sys.stdout.flush()

    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
