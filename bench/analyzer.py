"""Analyzer time on a generated store (10,000 runs, 1,000,000 steps), side by side with the same
rules fed by a plain Python loop over rows fetched whole from the store.

looptrace fetches only what the rules need (observations as hashes) in Arrow batches; the baseline
does what a first version would: ``fetchall()`` of the ``steps`` rows, then the same ``diagnose``.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

from looptrace.replay.analyzer import RunView, StepView, analyze_store, diagnose
from looptrace.tracer.store import Store

from .bigstore import make_big_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "analyzer: diagnose every run of a generated store (writes the diagnoses table)"
GOAL_S = 10.0


def _baseline(store: Store) -> float:
    started = time.perf_counter()
    with store.reader(locked_down=False) as conn:
        runs = conn.execute("SELECT run_id, status, model, error FROM runs ORDER BY run_id").fetchall()
        rows = conn.execute("SELECT run_id, step, call_index, tool, args, observation, observation_bytes, is_error, "
                            "error_type, context_tokens FROM steps ORDER BY run_id, step, call_index").fetchall()
    by_run: dict[str, list[StepView]] = {}
    for r in rows:
        key = hashlib.md5(r[5].encode()).hexdigest() if r[5] is not None else None
        by_run.setdefault(r[0], []).append(StepView(step=r[1], call_index=r[2], tool=r[3], args=r[4],
                                                    observation_key=key, observation_bytes=r[6] or 0,
                                                    is_error=bool(r[7]), error_type=r[8], context_tokens=r[9]))
    for run_id, status, model, error in runs:
        diagnose(RunView(run_id, status, tuple(by_run.get(run_id, ())), model, error))
    return time.perf_counter() - started


def run(quick: bool = False) -> list[Result]:
    runs = 1_000 if quick else 10_000
    with scratch_dir("looptrace-bench-analyzer-") as tmp:
        store = Store(make_big_store(Path(tmp) / "big.duckdb", runs=runs))

        def ours() -> float:
            started = time.perf_counter()
            analyze_store(store)
            return time.perf_counter() - started

        a, b = alternate(1 if quick else 3, ours, lambda: _baseline(store))
    return [Result("analyze all runs", "s", median(a), median(b), f"looptrace < {GOAL_S:.0f} s", median(a) < GOAL_S,
                   note=f"{runs:,} runs x 100 steps; medians of {len(a)} alternating rounds")]
