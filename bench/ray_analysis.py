"""The analysis of one Iceberg catalog: one process against one Ray task per partition on two nodes.

A generated store (``bigstore.py``; 400,000 steps by default) is exported into a SQLite SQL catalog
once per size. A local Ray cluster of two one-CPU nodes (``ray.cluster_utils.Cluster``) is started
once, and a warm-up round lets its workers import the analyzer. Then rounds alternate:
``analyze_catalog(ray=None)`` in this process, and ``analyze_catalog(ray=cluster)``, the same
partitions and the same function, neither writing. The ratio is Ray's throughput over one process's:
the wall-time speed-up. Both must give the same labels.

A speed-up is only as good as the CPU the machine gave: on a shared machine two workers may get
less than two cores between them. So each line also prints the **ceiling**: the cores the Ray tasks
got (their CPU seconds over the round's wall time) over the cores the one process got (the same
ratio), which is the speed-up two tasks doing the same work could show on what they were given; and
a **profile** of the Ray round (the tasks measure themselves, ``partitioned.EngineRun``): planning,
the wait for the first task to start, the imbalance (first worker done to last), and the tasks' CPU
against the one process's (work Ray added: start-up, reading, pickling).

``LOOPTRACE_BENCH_RAY_STEPS=400000,2000000`` measures both sizes (the larger takes minutes).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from .bigstore import make_big_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "ray analysis: analyze --catalog, one process vs one Ray task per partition on two one-CPU nodes"
STEPS_ENV = "LOOPTRACE_BENCH_RAY_STEPS"
GOAL = 1.4  # the goal for two one-CPU nodes on a 2-core machine


def _sizes(quick: bool) -> list[int]:
    if quick:
        return [40_000]
    return [int(s.replace("_", "")) for s in os.environ.get(STEPS_ENV, "400000").split(",") if s.strip()]


def run(quick: bool = False) -> list[Result]:
    try:
        import ray  # noqa: F401
        from ray.cluster_utils import Cluster
    except ImportError:
        print("  skipped: needs the scale extra (pip install 'looptrace[scale]')")
        return []

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    node = {"num_cpus": 1, "object_store_memory": 100 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
    cluster.add_node(**node)
    cluster.wait_for_nodes()
    try:
        return [_one_size(steps, cluster.address, rounds=2 if quick else 3) for steps in _sizes(quick)]
    finally:
        import ray as ray_module

        ray_module.shutdown()
        cluster.shutdown()


def _one_size(steps: int, address: str, rounds: int) -> Result:
    from looptrace.replay.partitioned import EngineRun, analyze_catalog
    from looptrace.tracer.export.catalog import export_catalog
    from looptrace.tracer.store.iceberg import CatalogStore

    runs = max(steps // 100, 1)
    with scratch_dir("ray") as tmp:
        os.environ["PYICEBERG_CATALOG__BENCHRAY__URI"] = f"sqlite:///{tmp / 'catalog.db'}"
        os.environ["PYICEBERG_CATALOG__BENCHRAY__WAREHOUSE"] = (tmp / "warehouse").as_uri()
        db = make_big_store(Path(tmp) / "big.duckdb", runs=runs, steps_per_run=100)
        catalog = CatalogStore("benchray")
        t0 = time.perf_counter()
        export_catalog(db, catalog)
        export_s = time.perf_counter() - t0
        analyze_catalog(catalog, ray=address, write=False)  # warm-up: the workers import the analyzer

        def timed(where: str | None) -> dict[str, Any]:
            seen: list[EngineRun] = []
            t, cpu = time.perf_counter(), time.process_time()
            results = analyze_catalog(catalog, ray=where, write=False, on_run=seen.append)
            return {"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu, "run": seen[0],
                    "labels": {r.run_id: r.primary.label if r.primary else None for r in results}}

        on_ray, one = alternate(rounds, lambda: timed(address), lambda: timed(None))
    same = all(r["labels"] == one[0]["labels"] for r in on_ray + one)
    ray_r = sorted(on_ray, key=lambda r: r["wall"])[len(on_ray) // 2]  # the median round, whole
    ray_s, one_s = ray_r["wall"], median([r["wall"] for r in one])
    one_cpu = median([r["cpu"] for r in one])
    er: EngineRun = ray_r["run"]
    # As throughput, so the ratio is the speed-up: Ray's steps/s over one process's.
    speedup = one_s / ray_s if ray_s else float("inf")
    cores_ray = er.task_cpu_s / ray_s if ray_s else 0.0
    cores_one = one_cpu / one_s if one_s else 0.0
    ceiling = cores_ray / cores_one if cores_one else 0.0
    n = runs * 100
    return Result(
        f"analysis, {n:,} steps in {runs:,} runs, {er.partitions} partitions", "steps/s", n / ray_s, n / one_s,
        f">= {GOAL}x", speedup >= GOAL,
        note=f"speed-up {speedup:.2f}x, ceiling {ceiling:.2f}x: the Ray tasks got {cores_ray:.2f} cores "
        f"({er.task_cpu_s:.2f} s CPU in {ray_s:.2f} s), the one process {cores_one:.2f} ({one_cpu:.2f} s in "
        f"{one_s:.2f} s); Ray round: planning {er.planning_s:.2f} s, first task after {er.first_start_s:.2f} s, "
        f"{er.workers} workers, the last done {er.last_gap_s:.2f} s after the first, tasks {er.task_wall_s:.2f} s wall in all, their CPU "
        f"{er.task_cpu_s / one_cpu if one_cpu else 0:.2f}x the one process's; {er.nodes} nodes, {er.cpus:g} CPUs; "
        f"labels {'identical' if same else 'DIFFER'}; export into the catalog took {export_s:.1f} s",
    )
