"""``looptrace analyze --catalog``: one process, and one Ray task per partition on a real two-node cluster.

The demo's store is exported into a catalog; the analysis over the catalog in one process, the
analysis as Ray tasks on a local cluster of two one-CPU nodes (``ray.cluster_utils.Cluster``, usage
stats off, a small object store) and the analysis of the DuckDB store itself must give every run the
same primary label, and the catalog's diagnoses table must hold what was printed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looptrace.tracer.export.source import open_source

from .conftest import query
from .test_catalog import catalog_env, cli

pytest.importorskip("pyiceberg")
ray = pytest.importorskip("ray")
# One worker builds this module's set-up once (tests/README.md: shared set-ups under xdist).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]

NAME = "raytest"


def _primary(analysis: list[dict]) -> dict[str, str | None]:
    return {r["run_id"]: next((d["label"] for d in r["diagnoses"] if d["is_primary"]), None) for r in analysis}


@pytest.fixture(scope="module")
def two_nodes():  # noqa: ANN201 - a ray.cluster_utils.Cluster
    from ray.cluster_utils import Cluster

    small = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        cluster = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False})
        try:
            cluster.add_node(**small)
            cluster.wait_for_nodes()
            yield cluster
        finally:
            cluster.shutdown()


def test_ray_and_one_process_give_every_run_the_same_primary_label(
    demo: Path, tmp_path: Path, two_nodes, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    env = {**catalog_env(tmp_path / "catalog", NAME), "RAY_USAGE_STATS_ENABLED": "0"}
    cli("export", "--db", str(demo), "--catalog", NAME, env=env)
    over_store = _primary(json.loads(cli("analyze", "--db", str(demo), "--json").stdout))

    one = cli("analyze", "--catalog", NAME, "--json", env=env)
    timeline = tmp_path / "timeline.json"
    on_ray = cli("analyze", "--catalog", NAME, "--ray", two_nodes.address, "--json", "--timeline", str(timeline), env=env)
    one_process, ray_tasks = _primary(json.loads(one.stdout)), _primary(json.loads(on_ray.stdout))
    finished = {r[0] for r in query(demo, "SELECT run_id FROM runs WHERE status <> 'incomplete'")}
    assert set(ray_tasks) == finished
    assert ray_tasks == one_process == {k: v for k, v in over_store.items() if k in finished}
    assert len(set(ray_tasks.values())) > 2  # the demo's scenarios fail in different ways
    # Progress as partitions finish, one line each; every partition with runs was a task.
    lines = [ln for ln in on_ray.stderr.splitlines() if ln.startswith("partition ")]
    assert lines and lines[-1].startswith(f"partition {len(lines)}/{len(lines)} done"), on_ray.stderr
    assert sum(int(ln.split("(")[1].split()[0]) for ln in lines) == len(finished)
    # It says where it ran, as measured: the cluster's address, its nodes and CPUs, the partitions.
    summary = next(ln for ln in on_ray.stderr.splitlines() if ln.startswith("analysed "))
    assert summary.startswith(f"analysed {len(lines)} partitions as Ray tasks on {two_nodes.address}: "
                              "2 nodes, 2 CPUs; "), summary
    assert " s wall (planning " in summary and "tasks used " in summary, summary
    assert next(ln for ln in one.stderr.splitlines() if ln.startswith("analysed ")).startswith(
        f"analysed {len(lines)} partitions in this process in ")
    # --timeline: a warm-up per CPU, started when the command connected, then a task per partition,
    # each with its worker, its times in order and its runs (replay/on_ray.py).
    ran = json.loads(timeline.read_text())
    warm, tasks = [t for t in ran["tasks"] if t["warm_up"]], [t for t in ran["tasks"] if not t["warm_up"]]
    assert ran["engine"] == "ray" and ran["partitions"] == len(lines) == len(tasks) and ran["cpus"] == 2
    assert ran["driver_cpu_s"] >= ran["driver_start_cpu_s"] > 0
    assert 1 <= len(warm) <= 2 and sum(t["runs"] for t in tasks) == len(finished)
    for t in warm + tasks:
        assert t["submitted"] <= t["started"] <= t["ended"] <= (t["received"] or t["ended"]), t
        assert t["worker_cpu_s"] >= t["cpu_s"] >= 0 and ":" in t["worker"]
    assert all(t["submitted"] <= min(p["submitted"] for p in tasks) for t in warm)  # before the planning

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with open_source(f"iceberg:{NAME}").reader() as conn:
        stored = dict(conn.execute("SELECT run_id, label FROM diagnoses WHERE is_primary").fetchall())
        n_rows = conn.execute("SELECT count(*) FROM diagnoses").fetchone()[0]
    assert stored == {k: v for k, v in ray_tasks.items() if v is not None}
    # Analysed twice (one process, then Ray): each run's diagnoses were replaced, not added again.
    assert n_rows == sum(len(r["diagnoses"]) for r in json.loads(on_ray.stdout))


def test_ray_without_a_catalog_is_refused(tmp_path: Path) -> None:
    done = cli("analyze", "--db", str(tmp_path / "x.duckdb"), "--ray", "auto", ok=False)
    assert done.returncode == 2 and "--catalog" in done.stderr



def test_a_driver_that_let_go_of_the_cluster_can_connect_again(two_nodes) -> None:  # noqa: ANN001
    # ``analyze --ray`` lets go of the cluster in a thread while it writes the diagnoses (on_ray.let_go);
    # a process that analyses again connects while that disconnection may still be under way.
    import ray

    from looptrace.replay import on_ray

    on_ray.connect(two_nodes.address)
    first = ray.get_runtime_context().get_job_id()
    on_ray.let_go()
    on_ray.connect(two_nodes.address)  # waits for the disconnection, then a new job
    assert ray.is_initialized() and ray.get_runtime_context().get_job_id() != first
    assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42
    on_ray.let_go()
    for thread in list(on_ray._leaving):
        thread.join(timeout=60)
    assert not ray.is_initialized()
