"""The Anthropic instrumentor's added CPU per call and final flush, against the two instrumentors users
would pick instead, and the bytes it stores per step against the same spans as OTLP protobuf.

Every variant runs the same tool loop (``agent_calls.py``: 200 ``messages.create`` calls, conversations
growing from 11 to 59 messages, full content kept) in a process of its own, against one scripted
Messages API server in another process. Added CPU per call is the variant's process CPU (all threads,
the final flush included) minus that of the same loop with no instrumentation, over the calls. The
peers are OpenInference's and OpenLLMetry's instrumentors with the OTel SDK's BatchSpanProcessor and
an in-memory exporter; looptrace writes durable, queryable rows (segments fsynced at flush). Rounds
alternate the order of the four variants; medians.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from .agent_calls import FIRST, LAST
from .results import Result
from .rounds import median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "instrumentor: Anthropic SDK calls traced by looptrace vs OpenInference and OpenLLMetry"
VARIANTS = ("none", "looptrace", "openinference", "openllmetry")
PEERS = {"openinference": "OpenInference", "openllmetry": "OpenLLMetry"}
ROOT = Path(__file__).resolve().parent.parent
GOAL_FLUSH = 2.0
GOAL_BYTES = 1.0


def _child(variant: str, url: str, db: Path, calls: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "bench.agent_calls", variant, url, str(db), str(calls)],
                         capture_output=True, text=True, check=True, cwd=ROOT, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(quick: bool = False) -> list[Result]:
    calls, rounds = (100, 3) if quick else (200, 5)
    server = subprocess.Popen([sys.executable, "-m", "bench.agent_calls", "serve"], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        with scratch_dir("instrumentor") as tmp:
            for r in range(rounds):
                order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
                for variant in order:
                    results[variant].append(_child(variant, url, tmp / f"{variant}-{r}.duckdb", calls))
            # Enough steps that the DuckDB file's fixed size (a block per table) is not what is measured.
            storage = _child("looptrace+otlp", url, tmp / "storage.duckdb", calls * 10)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(30)
    return _results(results, storage, calls, rounds)


def _cpu_ms(rows: list[dict[str, Any]]) -> float:
    return median([(r["loop_cpu"] + r["flush_cpu"]) / r["calls"] * 1e3 for r in rows])


def _results(results: dict[str, list[dict[str, Any]]], storage: dict[str, Any], calls: int,
             rounds: int) -> list[Result]:
    bare = _cpu_ms(results["none"])
    ours = _cpu_ms(results["looptrace"]) - bare
    flush_ours = median([r["flush_wall"] * 1e3 for r in results["looptrace"]])
    flush_cpu = median([r["flush_cpu"] * 1e3 for r in results["looptrace"]])
    shutdown = median([r["shutdown_wall"] * 1e3 for r in results["looptrace"]])
    stored = min(r["llm_calls_stored"] for r in results["looptrace"])
    out: list[Result] = []
    for variant, name in PEERS.items():
        theirs = _cpu_ms(results[variant]) - bare
        out.append(Result(f"added CPU per call vs {name}", "ms", ours, theirs, "ratio < 1x", ours < theirs,
                          note=f"workload: tool-loop conversations growing from {FIRST} to {LAST} "
                               f"messages ({-(-calls // ((LAST - FIRST) // 2 + 1))} conversations per process); "
                               f"{calls} calls x {rounds} rounds, "
                               f"medians; bare SDK loop {bare:.2f} ms CPU/call; "
                               f"looptrace stored {stored} llm_calls rows (warm-up calls included)"
                          if variant == "openinference" else ""))
    for variant, name in PEERS.items():
        theirs = median([r["flush_wall"] * 1e3 for r in results[variant]])
        out.append(Result(f"final flush vs {name}", "ms", flush_ours, theirs, f"ratio <= {GOAL_FLUSH:g}x",
                          flush_ours <= GOAL_FLUSH * theirs,
                          note=f"looptrace's flush writes and fsyncs a segment (durable, queryable; {flush_cpu:.1f} ms "
                               "of it CPU, the rest waiting for the disk); the peers' flush hands spans to an "
                               f"in-memory list. Then Tracing.shutdown() (compaction at exit: the store created, "
                               f"segments absorbed and deleted): {shutdown:.0f} ms" if variant == "openllmetry" else ""))
    steps = storage["steps_stored"]
    per_step, otlp_per_step = storage["store_bytes"] / steps, storage["otlp_bytes"] / steps
    out.append(Result("stored bytes per step vs the same spans as OTLP protobuf", "B", per_step, otlp_per_step,
                      f"ratio <= {GOAL_BYTES:g}x", per_step <= GOAL_BYTES * otlp_per_step,
                      note=f"{steps} steps; the DuckDB file after compaction, WAL and segments included"))
    return out
