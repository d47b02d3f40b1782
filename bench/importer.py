"""Import throughput on the shared corpus of real trajectories (skipped when absent), side by side
with only reading and JSON-decoding the same files."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "import: the shared corpus of real trajectories"
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def _decode_only(files: list[Path]) -> float:
    started = time.perf_counter()
    for f in files:
        raw = f.read_bytes()
        if f.suffix == ".gz":
            raw = gzip.decompress(raw)
        json.loads(raw)
    return time.perf_counter() - started


def run(quick: bool = False) -> list[Result]:
    if not (CORPUS / "labels.csv").exists():
        return []
    files = [p for p in CORPUS.rglob("*") if p.suffix in (".traj", ".gz", ".json")]
    counts: list[tuple[int, int]] = []
    with scratch_dir("looptrace-bench-import-") as tmp:

        def ours() -> float:
            db = Path(tmp) / f"corpus{len(counts)}.duckdb"
            started = time.perf_counter()
            report = import_paths(Store(db), [CORPUS])
            elapsed = time.perf_counter() - started
            counts.append((report.runs_imported, report.steps_imported))
            return elapsed

        a, b = alternate(1 if quick else 3, ours, lambda: _decode_only(files))
    runs, steps = counts[0]
    return [
        Result("throughput", "runs/s", runs / median(a), runs / median(b), "none (figures)", True,
               note=f"{runs} runs, {steps:,} steps, {len(files)} files; baseline: read + JSON-decode only"),
        Result("throughput", "steps/s", steps / median(a), steps / median(b), "none (figures)", True),
    ]
