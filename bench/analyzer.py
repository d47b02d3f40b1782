"""Analyzer time and peak memory on a generated store, against one DuckDB window query.

The store is the issue's size by default: 10,000 runs of 200 steps (2,000,000 steps;
``LOOPTRACE_BENCH_ANALYZER_STEPS=10000000`` for the 10M run, which takes minutes, and
``LOOPTRACE_BENCH_ANALYZER_RUN_STEPS`` for another run length). It is built through the bulk path (``bulkstore.py``: Parquet segments, absorbed).
The baseline is the cheapest set-based form of the analyzer's core question: one window query over
the stored ``action_key`` that computes each run's longest streak of identical actions, every row
fetched. Each side runs in a child process of its own, so its peak RSS (``VmHWM``) is its own;
rounds alternate which goes first.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .bulkstore import make_bulk_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run", "STREAK_SQL"]

TITLE = "analyzer: diagnose every run of a generated store (writes the diagnoses table)"
STEPS_ENV = "LOOPTRACE_BENCH_ANALYZER_STEPS"
RUN_STEPS_ENV = "LOOPTRACE_BENCH_ANALYZER_RUN_STEPS"
STEPS, RUN_STEPS, QUICK_STEPS = 2_000_000, 200, 100_000  # issue 38: 10,000 runs x 200 steps
GOAL_RATIO = 3.0
GOAL_RSS_MB = 2048

# Gaps and islands: within a run, rows of one action_key that are consecutive share
# (row number in the run) - (row number among that key's rows).
STREAK_SQL = """
WITH actions AS (
    SELECT run_id, action_key,
           row_number() OVER (PARTITION BY run_id ORDER BY step, call_index)
           - row_number() OVER (PARTITION BY run_id, action_key ORDER BY step, call_index) AS island
    FROM steps WHERE tool IS NOT NULL
)
SELECT run_id, max(n) AS longest_streak
FROM (SELECT run_id, action_key, island, count(*) AS n FROM actions GROUP BY ALL)
GROUP BY run_id
"""


def _child(mode: str, db: str) -> dict[str, Any]:
    from looptrace.replay.analyzer import analyze_store
    from looptrace.tracer.store import Store

    store = Store(db)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime  # imports excluded, as from the wall time
    started = time.perf_counter()
    if mode == "looptrace":
        n = len(analyze_store(store))
    else:
        with store.reader(locked_down=False) as conn:
            n = len(conn.execute(STREAK_SQL).fetchall())
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime - cpu0, "runs": n,
            "rss_mb": _peak_rss_mb()}


def _peak_rss_mb() -> float:
    """This process's own peak: VmHWM. Linux carries ``ru_maxrss`` across exec, so a child would report
    the bench process's size at the fork when that was larger."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 1024


def _measure(mode: str, db: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.analyzer", mode, str(db)], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> list[Result]:
    steps = int(os.environ.get(STEPS_ENV) or (QUICK_STEPS if quick else STEPS))
    run_steps = int(os.environ.get(RUN_STEPS_ENV) or RUN_STEPS)
    rounds = 1 if quick or steps >= 5_000_000 else 3
    with scratch_dir("analyzer") as tmp:
        t0 = time.perf_counter()
        db = make_bulk_store(tmp / "big.duckdb", steps, steps_per_run=run_steps)
        built = time.perf_counter() - t0
        ours, theirs = alternate(rounds, lambda: _measure("looptrace", db), lambda: _measure("window", db))
    t_ours, t_theirs = median([r["seconds"] for r in ours]), median([r["seconds"] for r in theirs])
    cpu_ours, cpu_theirs = median([r["cpu"] for r in ours]), median([r["cpu"] for r in theirs])
    rss_ours, rss_theirs = max(r["rss_mb"] for r in ours), max(r["rss_mb"] for r in theirs)
    note = (f"{steps:,} steps in {max(1, steps // run_steps):,} runs of {run_steps} (store built from Parquet segments in {built:.0f} s); "
            f"medians of {rounds} alternating rounds, each side in its own process; "
            f"set {STEPS_ENV}=10000000 for the 10M figure")
    return [
        Result("analyze all runs vs longest-streak window query", "s", t_ours, t_theirs,
               f"ratio <= {GOAL_RATIO:g}x", t_ours <= GOAL_RATIO * t_theirs, note),
        Result("analyze all runs vs the window query, CPU time (all threads)", "s", cpu_ours, cpu_theirs,
               f"ratio <= {GOAL_RATIO:g}x", cpu_ours <= GOAL_RATIO * cpu_theirs,
               "CPU time is the steadier figure on a shared machine: the window query uses both cores"),
        Result("peak RSS vs the window query's", "MB", rss_ours, rss_theirs, f"looptrace < {GOAL_RSS_MB} MB",
               rss_ours < GOAL_RSS_MB),
    ]


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], sys.argv[2])))
