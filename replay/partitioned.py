"""The analysis of an Iceberg catalog, partition by partition: in this process, or as Ray tasks.

The analyzer is a function of one run's rows, and the catalog keeps all rows of a run in one
partition (``bucket(run_id)``, ``tracer/store/iceberg/layout.py``), so a partition is a unit of work
that needs nothing from any other: no shuffle. ``analyze_partition`` opens a DuckDB session over
one partition's data files, with the same views as any store, and runs today's analyzer on it
(``load_runs`` then ``diagnose``). Without Ray, a loop calls it for each partition; with Ray, one
task per partition calls the very same function, wherever the cluster places it (a laptop's local
Ray, ``ray start`` nodes, KubeRay). Only the engine differs, so the labels cannot. The driver
writes the diagnoses once, in one atomic overwrite of the catalog's ``diagnoses`` table, and
reports each partition as it finishes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .analyzer.analyze import RunDiagnoses, _write, load_runs
from .analyzer.rules import diagnose
from .analyzer.thresholds import DEFAULT_THRESHOLDS, Thresholds

if TYPE_CHECKING:
    from looptrace.tracer.store.iceberg import CatalogStore

__all__ = ["analyze_partition", "analyze_catalog", "RAY_HINT", "EngineRun"]

RAY_HINT = "--ray needs Ray: install the scale extra: pip install 'looptrace[scale]'"
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
        return [RunDiagnoses(r.run_id, r.status, diagnose(r, thresholds)) for r in load_runs(conn)]
    finally:
        conn.close()


def _connect(address: str) -> None:
    try:
        import ray
    except ImportError:
        from looptrace.tracer.store.iceberg import CatalogError

        raise CatalogError(RAY_HINT) from None
    if not ray.is_initialized():
        # "auto": RAY_ADDRESS, else the cluster `ray start` runs on this machine.
        target = (os.environ.get("RAY_ADDRESS") or "auto") if address == "auto" else address  # set but empty: unset
        try:
            ray.init(address=target, logging_level="WARNING", log_to_driver=False, configure_logging=False)
        except ConnectionError as exc:
            # Ray's own message tells the user to set an `--address` flag, which is Ray's, not ours.
            from looptrace.tracer.store.iceberg import CatalogError

            where = (f"at {target}" if target != "auto" else
                     "(RAY_ADDRESS is not set and no `ray start` cluster runs on this machine)")
            raise CatalogError(f"--ray {address}: no Ray cluster found {where}. Start one with `ray start --head`, "
                               "give its address with --ray ADDRESS or RAY_ADDRESS, or leave --ray out to analyse "
                               "in this process") from exc


def _timed_partition(files: Mapping[str, Sequence[str]], thresholds: Thresholds,
                     threads: int) -> tuple[list[RunDiagnoses], tuple[float, float, float, str]]:
    """The Ray task: ``analyze_partition`` itself, with its (start, end) wall clock, CPU seconds and worker."""
    started, cpu = time.time(), time.process_time()
    results = analyze_partition(files, thresholds, threads=threads)
    return results, (started, time.time(), time.process_time() - cpu, f"{os.uname().nodename}:{os.getpid()}")


def _on_ray(parts: list[Mapping[str, Sequence[str]]], thresholds: Thresholds, address: str,
            on_partition: OnPartition | None) -> tuple[list[RunDiagnoses], dict[str, object]]:
    import ray

    _connect(address)
    task = ray.remote(num_cpus=1, max_retries=2)(_timed_partition)
    submitted = time.time()
    pending = [task.remote(files, thresholds, threads=1) for files in parts]
    results: list[RunDiagnoses] = []
    timings: list[tuple[float, float, float, str]] = []
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        got, timing = ray.get(done[0])
        results.extend(got)
        timings.append(timing)
        if on_partition is not None:
            on_partition(len(parts) - len(pending), len(parts), len(got))
    alive = [n for n in ray.nodes() if n.get("Alive")]
    last_end: dict[str, float] = {}
    for t in timings:
        last_end[t[3]] = max(last_end.get(t[3], 0.0), t[1])
    ends = sorted(last_end.values())
    return results, {
        "address": ray.get_runtime_context().gcs_address, "nodes": len(alive),
        "cpus": float(sum(n.get("Resources", {}).get("CPU", 0.0) for n in alive)),
        "task_cpu_s": sum(t[2] for t in timings), "task_wall_s": sum(t[1] - t[0] for t in timings),
        "first_start_s": max(0.0, min((t[0] for t in timings), default=submitted) - submitted),
        "workers": len(last_end), "last_gap_s": ends[-1] - ends[0] if ends else 0.0}


def analyze_catalog(store: CatalogStore, *, ray: str | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                    write: bool = True, on_partition: OnPartition | None = None,
                    on_run: Callable[[EngineRun], None] | None = None) -> list[RunDiagnoses]:
    """Every run of the catalog, diagnosed per partition (on the Ray cluster at ``ray``, or ``auto``,
    or in this process when None), in run_id order; the diagnoses replace the catalog's earlier ones.
    ``on_run`` is told where and how it ran (``EngineRun``) before the diagnoses are written."""
    started = time.perf_counter()
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
        results, measured = _on_ray(parts, thresholds, ray, on_partition)
    if on_run is not None:
        on_run(EngineRun("ray" if ray is not None else "process", len(parts), time.perf_counter() - started,
                         planning, **measured))  # type: ignore[arg-type]
    results.sort(key=lambda r: r.run_id)
    if write and results:
        _write(store, results)
    return results
