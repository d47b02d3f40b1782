"""The catalog a team shares: pyiceberg's SQL catalog on a real PostgreSQL server, many writers at once.

Three real ``looptrace collect --catalog`` receivers (each fed two runs by its own agent host) and a
real ``looptrace export --catalog`` (the demo's store) append to one catalog in a PostgreSQL database
at the same time, while a reader keeps querying the views and ``looptrace analyze --catalog --ray``
runs on a local Ray cluster in the middle of it. Their commits race on the same tables; the losers
retry. Every run must arrive once, with every step, the reader must never see a run or a step twice,
and the analysis must finish on the runs it found. Also: docs/scale.md's PostgreSQL walk-through,
run as written.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from looptrace.tracer.export.source import open_source

from .conftest import PYTHON, ROOT, python_env, query
from .test_catalog import catalog_env, cli
from .test_catalog_collect import NAME, TIMEOUT, _start_collect

pytest.importorskip("pyiceberg")
pytest.importorskip("psycopg2")
ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

# Two runs per agent host (tests/test_catalog_collect.py sends five each to three receivers on SQLite).
HOSTS = (("healthy", "stagnation"), ("hallucinated-tools", "cycle"), ("max-iters", "end-turn"))
# What a reader checks while the writers write: no run listed twice, no step twice, no span twice.
TWICE = ("SELECT (SELECT count(*) FROM runs) - (SELECT count(DISTINCT run_id) FROM runs), "
         "(SELECT count(*) FROM (SELECT run_id, step FROM step_records GROUP BY ALL HAVING count(*) > 1)), "
         "(SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM spans), (SELECT count(*) FROM runs)")


@pytest.fixture(scope="module")
def one_node():  # noqa: ANN201 - a ray.cluster_utils.Cluster
    """A local Ray cluster of one two-CPU node (the two-node case is tests/test_catalog_ray.py)."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_USAGE_STATS_ENABLED", "0")
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 2, "object_store_memory": 80 * 1024 * 1024, "include_dashboard": False})
        try:
            cluster.wait_for_nodes()
            yield cluster
        finally:
            cluster.shutdown()


def _reader(stop: threading.Event, seen: list[tuple[int, ...]], errors: list[str]) -> None:
    while not stop.is_set():
        try:
            with open_source(f"iceberg:{NAME}").reader() as conn:
                seen.append(tuple(conn.execute(TWICE).fetchone()))
        except Exception as exc:  # noqa: BLE001 - no tables yet is fine; anything else is reported
            if "no looptrace tables" not in str(exc):
                errors.append(f"{type(exc).__name__}: {exc}")
        stop.wait(1.0)


@pytest.mark.xdist_group("ray")  # its Ray cluster takes turns with the other Ray tests (tests/README.md)
def test_receivers_an_export_a_reader_and_ray_share_one_postgres_catalog(
    demo: Path, tmp_path: Path, postgres, one_node, monkeypatch: pytest.MonkeyPatch  # noqa: ANN001
) -> None:
    env_only = catalog_env(tmp_path / "catalog", NAME, postgres.create_database("shared"))
    for k, v in env_only.items():
        monkeypatch.setenv(k, v)
    env = {**python_env(), **env_only, "RAY_USAGE_STATS_ENABLED": "0"}
    finished = {r[0] for r in query(demo, "SELECT run_id FROM runs WHERE status <> 'incomplete'")}
    started = [_start_collect(env, tmp_path / f"journal-{i}.duckdb") for i in range(len(HOSTS))]
    stop, seen, errors = threading.Event(), [], []
    reader = threading.Thread(target=_reader, args=(stop, seen, errors))
    reader.start()
    sent: dict[str, tuple[str, int]] = {}
    try:
        agents = [subprocess.Popen([PYTHON, "-m", "tests.scale_agent", endpoint, *names], cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for (_, endpoint), names in zip(started, HOSTS)]
        export = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "export", "--db", str(demo), "--catalog",
                                   NAME], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + TIMEOUT
        while not (seen and seen[-1][3] > 0) and time.monotonic() < deadline:
            time.sleep(0.1)  # the first run is readable: analyse what is there while the rest comes in
        analysis = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "analyze", "--catalog", NAME, "--ray",
                                     one_node.address, "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        for agent in agents:
            out, err = agent.communicate(timeout=TIMEOUT)
            assert agent.returncode == 0 and out.endswith("flushed\n"), out + err
            for _, run_id, status, steps in (ln.split() for ln in out.splitlines()[:-1]):
                sent[run_id] = (status, int(steps))
        exported, export_err = export.communicate(timeout=TIMEOUT)
        analysed, analyse_err = analysis.communicate(timeout=TIMEOUT)
    finally:
        for proc, _ in started:
            proc.send_signal(signal.SIGINT)
        outputs = [proc.communicate(timeout=TIMEOUT) for proc, _ in started]
        stop.set()
        reader.join(60)
    for (proc, _), (out, err) in zip(started, outputs):
        assert proc.returncode == 0, out + err
    assert export.returncode == 0 and f"exported {len(finished)} runs" in exported, exported + export_err
    assert analysis.returncode == 0, analyse_err

    # The reader saw the catalog grow and never saw anything twice.
    assert not errors, errors[:3]
    assert seen and all(s[:3] == (0, 0, 0) for s in seen), [s for s in seen if s[:3] != (0, 0, 0)][:3]
    assert [s[3] for s in seen] == sorted(s[3] for s in seen)  # runs only ever added

    with open_source(f"iceberg:{NAME}").reader() as conn:
        stored = {r: (s, n) for r, s, n in conn.execute("SELECT run_id, status, n_steps FROM runs").fetchall()}
        assert conn.execute(TWICE).fetchone()[:3] == (0, 0, 0)
        assert conn.execute("SELECT count(*), count(DISTINCT run_id) FROM run_records "
                            "WHERE run_id NOT IN (SELECT unnest(?::VARCHAR[]))", [sorted(finished)]).fetchone() \
            == (len(sent), len(sent))
    assert len(sent) == 6 and {r: stored[r] for r in sent} == sent  # every agent run, with all its steps
    assert set(stored) == set(sent) | finished  # and every exported run, nothing else
    with open_source(str(demo)).reader() as store, open_source(f"iceberg:{NAME}").reader() as cat:
        step_sql = "SELECT run_id, step, thought FROM steps WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY ALL"
        assert cat.execute(step_sql, [sorted(finished)]).fetchall() == store.execute(step_sql, [sorted(finished)]).fetchall()

    # The analysis ran on Ray during the writes, over the runs committed when it planned, and says so.
    on_ray = json.loads(analysed)
    assert on_ray and {r["run_id"] for r in on_ray} <= set(stored)
    summary = next(ln for ln in analyse_err.splitlines() if ln.startswith("analysed "))
    assert re.search(r"as Ray tasks on [\d.]+:\d+: 1 nodes, 2 CPUs; [\d.]+ s wall", summary), summary


def _walkthrough() -> str:
    """The PostgreSQL walk-through's shell block in docs/scale.md."""
    text = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    section = text.split("### A PostgreSQL catalog, step by step", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_the_postgresql_walkthrough_runs_as_written(demo: Path, tmp_path: Path, postgres) -> None:  # noqa: ANN001
    """docs/scale.md's steps, with this test's server standing in for ``catalog-db:5432`` and the
    database the steps name made on it (as the team's DBA would). Nothing else is changed."""
    script = _walkthrough()
    assert "catalog-db:5432" in script and "PYICEBERG_CATALOG__TEAM__URI=postgresql+psycopg2://" in script
    postgres.create_database("iceberg")
    script = script.replace("catalog-db:5432", f"127.0.0.1:{postgres.port}")
    (tmp_path / "traces.duckdb").write_bytes(demo.read_bytes())  # the store the steps start from
    env = {k: v for k, v in python_env().items() if not k.startswith("PYICEBERG_")}
    env["PATH"] = f"{Path(PYTHON).parent}:{env['PATH']}"  # `looptrace` from this checkout's environment
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, env={**env, "HOME": str(tmp_path)}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    n_runs = query(demo, "SELECT count(*) FROM runs WHERE status <> 'incomplete'")[0][0]
    assert f"exported {n_runs} runs" in done.stdout, done.stdout
    # Configured by variables, then by the yaml: the same catalog, the same answer.
    assert done.stdout.count(f"runs\n{n_runs}\n") == 2, done.stdout
