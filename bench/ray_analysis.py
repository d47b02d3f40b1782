"""The analysis of one Iceberg catalog: one process against one Ray task per partition on two nodes.

A generated store (``bigstore.py``; 400,000 steps by default, ``LOOPTRACE_BENCH_RAY_STEPS`` to change)
is exported into a SQLite SQL catalog once. A local Ray cluster of two one-CPU nodes
(``ray.cluster_utils.Cluster``) is started once, and a warm-up round lets its workers import the
analyzer. Then rounds alternate: ``analyze_catalog(ray=None)`` in this process, and
``analyze_catalog(ray=cluster)``, the same partitions and the same function, neither writing. The
ratio is Ray's throughput over one process's: the wall-time speed-up. Both must give the same labels.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .bigstore import make_big_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "ray analysis: analyze --catalog, one process vs one Ray task per partition on two one-CPU nodes"
STEPS_ENV = "LOOPTRACE_BENCH_RAY_STEPS"
GOAL = 1.4  # the goal for two one-CPU nodes on a 2-core machine


def run(quick: bool = False) -> list[Result]:
    try:
        import ray  # noqa: F401
        from ray.cluster_utils import Cluster
    except ImportError:
        print("  skipped: needs the scale extra (pip install 'looptrace[scale]')")
        return []
    from looptrace.replay.partitioned import analyze_catalog
    from looptrace.tracer.export.catalog import export_catalog
    from looptrace.tracer.store.iceberg import CatalogStore

    steps = 40_000 if quick else int(os.environ.get(STEPS_ENV, "400000"))
    runs = max(steps // 100, 1)
    with scratch_dir("ray") as tmp:
        os.environ["PYICEBERG_CATALOG__BENCHRAY__URI"] = f"sqlite:///{tmp / 'catalog.db'}"
        os.environ["PYICEBERG_CATALOG__BENCHRAY__WAREHOUSE"] = (tmp / "warehouse").as_uri()
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        db = make_big_store(Path(tmp) / "big.duckdb", runs=runs, steps_per_run=100)
        catalog = CatalogStore("benchray")
        t0 = time.perf_counter()
        export_catalog(db, catalog)
        export_s = time.perf_counter() - t0
        node = {"num_cpus": 1, "object_store_memory": 100 * 1024 * 1024}
        cluster = Cluster(initialize_head=True, head_node_args={**node, "include_dashboard": False})
        cluster.add_node(**node)
        cluster.wait_for_nodes()
        try:
            address = cluster.address
            analyze_catalog(catalog, ray=address, write=False)  # warm-up: the workers import the analyzer

            def timed(where: str | None) -> tuple[float, dict[str, str | None]]:
                t = time.perf_counter()
                results = analyze_catalog(catalog, ray=where, write=False)
                return time.perf_counter() - t, {r.run_id: r.primary.label if r.primary else None for r in results}

            rounds = 2 if quick else 3
            on_ray, one = alternate(rounds, lambda: timed(address), lambda: timed(None))
        finally:
            import ray as ray_module

            ray_module.shutdown()
            cluster.shutdown()
    same = all(r[1] == one[0][1] for r in on_ray + one)
    ray_s, one_s = median([r[0] for r in on_ray]), median([r[0] for r in one])
    n = runs * 100
    # As throughput, so the ratio is the speed-up: Ray's steps/s over one process's.
    speedup = one_s / ray_s if ray_s else float("inf")
    return [Result(
        f"analysis, {n:,} steps in {runs:,} runs, 16 partitions", "steps/s", n / ray_s, n / one_s,
        f">= {GOAL}x", speedup >= GOAL,
        note=f"wall {ray_s:.2f} s on Ray vs {one_s:.2f} s in one process; labels {'identical' if same else 'DIFFER'}; "
        f"export into the catalog took {export_s:.1f} s",
    )]
