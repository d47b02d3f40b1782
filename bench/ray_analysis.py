"""``looptrace analyze --catalog``, the command a user runs: in one process, and with ``--ray`` on two one-CPU nodes.

A generated store (``bigstore.py``; 400,000 steps by default) is exported into a SQLite SQL catalog
once per size. A local Ray cluster of two one-CPU nodes (``ray.cluster_utils.Cluster``) is started
once and kept, as ``ray start`` keeps one: the row measures **a running cluster and a new command**.
Each round runs the real command in a new process, ``python -m looptrace.tracer.cli analyze
--catalog NAME --json`` with and without ``--ray ADDRESS``, and times it from the spawn to its
summary line on stderr (``analysed N partitions ...``): Python's start, the imports, opening the
catalog, planning, connecting to Ray, the job's worker processes starting and importing, every
partition. Nothing is warmed in between: each ``--ray`` command is a new Ray job,
whose workers Ray starts afresh. The rounds alternate, after one unmeasured run of each (the page
cache: the same files either way), and both must give the same labels. A second row times each round
to the command's exit, what the user waits for: after the summary both write the diagnoses once
(``replace_diagnoses``; each run's agent and start are read beside it), print, and the Ray command also lets go
of the cluster (in a thread, beside the write: ``on_ray.let_go``); its note splits that tail.

A speed-up is only as good as the CPU the machine gave: on a shared machine two workers may get
less than two cores between them. So each line also prints the **ceiling**: the cores the Ray
command got (its driver's CPU and its worker processes', start-up included, over the time to the
summary) over the cores the one-process command got (the same ratio). Then a **profile** of the
median Ray round from the command's ``--timeline`` (``replay/on_ray.py``): when the driver
submitted the warm-ups and the partitions, when the workers started and were ready, the first and
last partition, how far apart the workers finished, and the tasks' CPU against the one process's.

``LOOPTRACE_BENCH_RAY_STEPS=400000,2000000`` measures both sizes (the larger takes minutes).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .bigstore import make_big_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "ray analysis: the analyze --catalog command, one process vs --ray (one task per partition) on two one-CPU nodes"
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
        rounds = 2 if quick else 3
        return [row for steps in _sizes(quick) for row in _one_size(steps, cluster.address, rounds)]
    finally:
        import ray as ray_module

        ray_module.shutdown()
        cluster.shutdown()


def _one_size(steps: int, address: str, rounds: int) -> list[Result]:
    """Two rows: spawn to the summary line (the analysis), spawn to the command's exit (the diagnoses
    written too: what a user running the command waits for)."""
    from looptrace.tracer.export.catalog import export_catalog
    from looptrace.tracer.store.iceberg import CatalogStore

    runs = max(steps // 100, 1)
    with scratch_dir("ray") as tmp:
        env = {**os.environ, "PYICEBERG_CATALOG__BENCHRAY__URI": f"sqlite:///{tmp / 'catalog.db'}",
               "PYICEBERG_CATALOG__BENCHRAY__WAREHOUSE": (tmp / "warehouse").as_uri()}
        os.environ.update(env)
        db = make_big_store(Path(tmp) / "big.duckdb", runs=runs, steps_per_run=100)
        t0 = time.perf_counter()
        export_catalog(db, CatalogStore("benchray"))
        export_s = time.perf_counter() - t0
        for where in (address, None):  # the page cache, for both alike
            _command(tmp, env, where)
        on_ray, one = alternate(rounds, lambda: _command(tmp, env, address), lambda: _command(tmp, env, None))
    same = all(r["labels"] == one[0]["labels"] for r in on_ray + one)
    ray_r = sorted(on_ray, key=lambda r: r["summary"])[len(on_ray) // 2]  # the median round, whole
    one_r = sorted(one, key=lambda r: r["summary"])[len(one) // 2]
    ray_s, one_s = ray_r["summary"], one_r["summary"]
    er, eo = ray_r["run"], one_r["run"]
    speedup = one_s / ray_s if ray_s else float("inf")
    workers: dict[str, float] = {}
    for t in er["tasks"]:
        workers[t["worker"]] = max(workers.get(t["worker"], 0.0), t["worker_cpu_s"])
    ray_cpu = er["driver_cpu_s"] + sum(workers.values())
    cores_ray, cores_one = ray_cpu / ray_s, eo["driver_cpu_s"] / one_s
    ceiling = cores_ray / cores_one if cores_one else 0.0
    task_cpu = sum(t["cpu_s"] for t in er["tasks"] if not t["warm_up"])
    warm = [t for t in er["tasks"] if t["warm_up"]]
    n = runs * 100
    # Where the Ray command's extra CPU went: each part against the one process's.
    cpu = (f"CPU, Ray command against one process: before the analysis (start, imports, catalog; Ray's driver "
           f"also imports ray and connects) {er['driver_start_cpu_s']:.2f} s against {eo['driver_start_cpu_s']:.2f} s; "
           f"the driver during it {er['driver_cpu_s'] - er['driver_start_cpu_s']:.2f} s against "
           f"{eo['driver_cpu_s'] - eo['driver_start_cpu_s']:.2f} s (the one process analyses); the workers' start-up "
           f"{sum(t['worker_cpu_s'] - t['cpu_s'] for t in warm):.2f} s and warm-ups {sum(t['cpu_s'] for t in warm):.2f} s; "
           f"the partitions' tasks {task_cpu:.2f} s")
    to_summary = Result(
        f"analyze --catalog, {n:,} steps in {runs:,} runs, {er['partitions']} partitions: spawn to summary", "steps/s",
        n / ray_s, n / one_s, f">= {GOAL}x", speedup >= GOAL,
        note=f"speed-up {speedup:.2f}x, ceiling {ceiling:.2f}x: the Ray command got {cores_ray:.2f} cores "
        f"({ray_cpu:.2f} s CPU, driver and workers, in {ray_s:.2f} s), the one process {cores_one:.2f} "
        f"({eo['driver_cpu_s']:.2f} s in {one_s:.2f} s), so the speed-up is the ceiling times "
        f"{eo['driver_cpu_s'] / ray_cpu if ray_cpu else 0:.2f}, the one process's CPU over the Ray command's; "
        f"{cpu}; the median Ray round: {_profile(ray_r)}; one process: planning "
        f"{eo['planning_s']:.2f} s, planning and partitions {eo['wall_s']:.2f} s of its {one_s:.2f} s; "
        f"{er['nodes']} nodes, {er['cpus']:g} CPUs; labels {'identical' if same else 'DIFFER'}; export into the "
        f"catalog took {export_s:.1f} s",
    )
    return [to_summary, _to_exit(on_ray, one, n, runs, speedup)]


def _to_exit(on_ray: list[dict[str, Any]], one: list[dict[str, Any]], n: int, runs: int,
             to_summary: float) -> Result:
    """Spawn to exit, each side's median round by that time, and where the time after the summary went."""
    ray_r = sorted(on_ray, key=lambda r: r["exit"])[len(on_ray) // 2]
    one_r = sorted(one, key=lambda r: r["exit"])[len(one) // 2]
    ray_s, one_s = ray_r["exit"], one_r["exit"]
    speedup = one_s / ray_s if ray_s else float("inf")

    def after(r: dict[str, Any]) -> str:
        a = r["run"].get("after_summary", {})
        tail = r["exit"] - r["summary"]
        if not a:
            return f"{tail:.2f} s"
        rest = tail - a["diagnoses_written_s"] - a["output_s"]
        return (f"{tail:.2f} s (the diagnoses written, each run's agent and start read beside it "
                f"{a['diagnoses_written_s']:.2f} s, the output printed {a['output_s']:.2f} s, the process's exit "
                f"{rest:.2f} s)")

    return Result(
        f"analyze --catalog, {n:,} steps in {runs:,} runs: spawn to exit (the diagnoses written)", "steps/s",
        n / ray_s, n / one_s, f">= {GOAL}x", speedup >= GOAL,
        note=f"to the command's end {speedup:.2f}x ({ray_s:.2f} s with Ray against {one_s:.2f} s in one process; "
        f"to the summary line {to_summary:.2f}x); after the summary the Ray command took {after(ray_r)}, the one "
        f"process {after(one_r)}; the diagnoses of {runs:,} runs are one Iceberg overwrite on both sides, and the "
        "Ray command lets go of the cluster in a thread meanwhile",
    )


def _command(tmp: Path, env: dict[str, str], ray: str | None) -> dict[str, Any]:
    """One ``looptrace analyze --catalog`` in a new process: when its summary came, when it ended, its
    --timeline, its labels."""
    timeline, out = tmp / "timeline.json", tmp / "analysis.json"
    cmd = [sys.executable, "-m", "looptrace.tracer.cli", "analyze", "--catalog", "benchray", "--json",
           "--timeline", str(timeline), *(["--ray", ray] if ray else [])]
    gc.collect()
    with open(out, "w") as stdout:
        spawned = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        summary, lines = 0.0, []
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("analysed ") and not summary:
                summary = time.time() - spawned
        ended = time.time() - spawned
    if proc.wait() != 0 or not summary:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{''.join(lines)[-3000:]}")
    run = json.loads(timeline.read_text())
    labels = {r["run_id"]: next((d["label"] for d in r["diagnoses"] if d["is_primary"]), None)
              for r in json.loads(out.read_text())}
    return {"summary": summary, "exit": ended, "run": run, "labels": labels, "spawned": spawned}


def _profile(r: dict[str, Any]) -> str:
    """Where the Ray command's time went, in seconds after its spawn."""
    run, t0 = r["run"], r["spawned"]
    warm = [t for t in run["tasks"] if t["warm_up"]]
    parts = [t for t in run["tasks"] if not t["warm_up"]]
    if not parts:
        return "no tasks"
    at = lambda x: x - t0  # noqa: E731
    ready = ", ".join(f"{at(t['ended']):.2f}" for t in sorted(warm, key=lambda t: t["ended"]))
    began = {t["worker"]: t["worker_started"] for t in run["tasks"]}
    started = ", ".join(f"{at(s):.2f}" for s in sorted(began.values()))
    return (f"warm-ups submitted at {at(warm[0]['submitted']) if warm else float('nan'):.2f} s, worker processes "
            f"started at {started} s, ready (warm-up done) at {ready or '-'} s; partitions submitted at "
            f"{at(parts[0]['submitted']):.2f} s (planning {run['planning_s']:.2f} s), the first started at "
            f"{at(min(t['started'] for t in parts)):.2f} s, the last result at {at(max(t['received'] for t in parts)):.2f} s, "
            f"summary at {r['summary']:.2f} s; {run['workers']} workers ran "
            f"{'/'.join(str(sum(1 for t in parts if t['worker'] == w)) for w in sorted({t['worker'] for t in parts}))} "
            f"partitions, the last done {run['last_gap_s']:.2f} s after the first; a partition took "
            f"{min(t['ended'] - t['started'] for t in parts):.2f} to {max(t['ended'] - t['started'] for t in parts):.2f} s")
