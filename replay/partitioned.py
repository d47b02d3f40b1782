"""The analysis of an Iceberg catalog, partition by partition: in this process, or as Ray tasks.

The analyzer is a function of one run's rows, and the catalog keeps all rows of a run in one
partition (``bucket(run_id)``, ``tracer/store/iceberg/layout.py``), so a partition is a unit of work
that needs nothing from any other: no shuffle. ``analyze_partition`` opens a DuckDB session over
one partition's data files, with the same views as any store, and runs on it the function
``analyze_store`` runs on a whole store (``diagnose_all``: the column screen, the rules where the
screen cannot settle a run, ``running`` runs skipped), so a label cannot depend on the entry point.
Without Ray, a loop calls it for each partition; with Ray, one task per partition calls the very
same function, wherever the cluster places it (a laptop's local Ray, ``ray start`` nodes, KubeRay). Only the engine differs, so the labels cannot. The driver
writes the diagnoses once, in one atomic overwrite of the catalog's ``diagnoses`` table, and
reports each partition as it finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from .analyzer.analyze import RunDiagnoses, _no_collection, _write, diagnose_all
from .analyzer.thresholds import DEFAULT_THRESHOLDS, Thresholds
from .on_ray import RAY_HINT, TaskTiming, connect

if TYPE_CHECKING:
    from looptrace.tracer.store.iceberg import CatalogStore

__all__ = ["analyze_partition", "analyze_catalog", "connect_ray", "RAY_HINT", "EngineRun"]

# (partitions done, partitions in all, runs diagnosed in the one just done)
OnPartition = Callable[[int, int, int], None]


@dataclass(frozen=True)
class EngineRun:
    """Where and how an analysis ran, as measured: what ``analyze`` prints and the bench reads.
    On Ray, the cluster as the driver saw it (its address, live nodes, CPUs) and what the tasks
    measured themselves: their summed CPU and wall time, and how long the first waited to start."""

    engine: str  # "ray" or "process"
    partitions: int
    wall_s: float  # planning to the last result, diagnoses not written yet
    planning_s: float  # asking the catalog for each partition's data files
    address: str | None = None
    nodes: int = 1
    cpus: float = 1.0
    task_cpu_s: float = 0.0
    task_wall_s: float = 0.0
    first_start_s: float = 0.0  # from the tasks' submission to the first one running
    workers: int = 0  # worker processes that ran tasks
    last_gap_s: float = 0.0  # from the first worker to finish its last task to the last one: imbalance
    driver_cpu_s: float = 0.0  # this process's CPU since it started, when the analysis ended
    driver_start_cpu_s: float = 0.0  # the same when the analysis began: its start, imports, opening the catalog
    timeline: tuple[TaskTiming, ...] = ()  # the warm-ups, then each partition's task, as they started

    def as_json(self) -> dict[str, object]:
        """What ``analyze --timeline`` writes: these figures, and each task's timeline (epoch seconds)."""
        return {**{k: v for k, v in asdict(self).items() if k != "timeline"},
                "tasks": [asdict(t) for t in self.timeline]}

    def summary(self) -> str:
        if self.engine != "ray":
            return (f"analysed {self.partitions} partitions in this process in {self.wall_s:.2f} s "
                    f"(planning {self.planning_s:.2f} s)")
        cores = self.task_cpu_s / self.wall_s if self.wall_s else 0.0
        return (f"analysed {self.partitions} partitions as Ray tasks on {self.address}: {self.nodes} nodes, "
                f"{self.cpus:g} CPUs; {self.wall_s:.2f} s wall (planning {self.planning_s:.2f} s, first task "
                f"started after {self.first_start_s:.2f} s; {self.workers} workers, the last done "
                f"{self.last_gap_s:.2f} s after the first); "
                f"tasks used {self.task_cpu_s:.2f} s CPU in {self.task_wall_s:.2f} s of task time, {cores:.2f} cores "
                "on average")


def analyze_partition(files: Mapping[str, Sequence[str]], thresholds: Thresholds = DEFAULT_THRESHOLDS,
                      *, threads: int | None = None) -> list[RunDiagnoses]:
    """Diagnose every run whose rows are in ``files`` (table -> local Parquet paths of one partition);
    ``threads`` caps DuckDB's threads (a Ray task holds one CPU: it should not use every core)."""
    from looptrace.tracer.store.iceberg.session import open_session

    conn = open_session(files)
    try:
        if threads is not None:
            conn.execute(f"SET threads = {int(threads)}")
        with _no_collection():
            return diagnose_all(conn, thresholds)
    finally:
        conn.close()


def connect_ray(address: str) -> None:
    """Connect to the Ray cluster at ``address`` now and start its workers warming (``on_ray.py``),
    so they start while the catalog opens and plans; ``analyze_catalog`` then finds them ready."""
    connect(address, analyze_partition.__module__)


def analyze_catalog(store: CatalogStore, *, ray: str | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                    write: bool = True, on_partition: OnPartition | None = None,
                    on_run: Callable[[EngineRun], None] | None = None) -> list[RunDiagnoses]:
    """Every run of the catalog, diagnosed per partition (on the Ray cluster at ``ray``, or ``auto``,
    or in this process when None), in run_id order; the diagnoses replace the catalog's earlier ones.
    ``on_run`` is told where and how it ran (``EngineRun``) before the diagnoses are written."""
    started, start_cpu = time.perf_counter(), time.process_time()
    parts = [files for _, files in sorted(store.partitions().items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
             if files.get("run_records")]  # the null partition holds spans of no run
    planning = time.perf_counter() - started
    measured: dict[str, object] = {}
    if ray is None:
        results: list[RunDiagnoses] = []
        for i, files in enumerate(parts, start=1):
            got = analyze_partition(files, thresholds)
            results.extend(got)
            if on_partition is not None:
                on_partition(i, len(parts), len(got))
    else:
        from .on_ray import run_tasks

        results, measured = run_tasks(analyze_partition, parts, thresholds, ray, on_partition)
    if on_run is not None:
        on_run(EngineRun("ray" if ray is not None else "process", len(parts), time.perf_counter() - started,
                         planning, driver_cpu_s=time.process_time(), driver_start_cpu_s=start_cpu,
                         **measured))  # type: ignore[arg-type]
    results.sort(key=lambda r: r.run_id)
    if write and results:
        _write(store, results)
    return results
