"""Several writers at once: three real ``looptrace collect`` processes appending to one Iceberg catalog.

Each receiver gets five runs from its own agent host (``tests/scale_agent.py``: the real loop and
SDK, traced over OTLP only) while the other two are writing; their Iceberg commits race on the same
tables in one SQLite SQL catalog and the losers retry. Every run must arrive once, with every step
its agent took, and the small files all those commits made are compacted by ``looptrace compact
--catalog`` without changing a row.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from looptrace.tracer.export.source import open_source

from .conftest import PYTHON, ROOT, python_env
from .test_catalog import catalog_env, cli

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.slow

NAME = "shared"
# Five distinct scenarios per host (a host's scripted server tells its runs apart by task).
HOSTS = (("healthy", "stagnation", "max-iters", "end-turn", "cycle"),
         ("hallucinated-tools", "healthy", "cycle", "end-turn", "stagnation"),
         ("max-iters", "healthy", "end-turn", "unknown-tool", "hallucinated-tools"))
TIMEOUT = 240


def _start_collect(env: dict[str, str], journal: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--catalog", NAME, "--port", "0",
                             "--grpc-port", "off", "--settle", "0", "--diagnose-every", "0", "--journal", str(journal)],
                            cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line + (proc.stderr.read() if proc.stderr else "")
    port = urlsplit(line.split("listening on ", 1)[1].split(",", 1)[0]).port
    return proc, f"http://127.0.0.1:{port}"


def test_three_collectors_append_to_one_catalog_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**python_env(), **catalog_env(tmp_path / "catalog", NAME)}
    started = [_start_collect(env, tmp_path / f"journal-{i}.duckdb") for i in range(len(HOSTS))]
    sent: dict[str, tuple[str, str, int]] = {}  # run_id -> (scenario, status, steps) as the agent saw it
    try:
        agents = [subprocess.Popen([PYTHON, "-m", "tests.scale_agent", endpoint, *names], cwd=ROOT, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for (_, endpoint), names in zip(started, HOSTS)]
        for agent in agents:
            out, err = agent.communicate(timeout=TIMEOUT)
            assert agent.returncode == 0 and out.endswith("flushed\n"), out + err
            for name, run_id, status, steps in (ln.split() for ln in out.splitlines()[:-1]):
                sent[run_id] = (name, status, int(steps))
    finally:
        for proc, _ in started:
            proc.send_signal(signal.SIGINT)  # as Ctrl-C: each writes what it still buffers
        outputs = [proc.communicate(timeout=TIMEOUT) for proc, _ in started]
    for (proc, _), (out, err) in zip(started, outputs):
        assert proc.returncode == 0, out + err
    assert len(sent) == 15

    env_only = catalog_env(tmp_path / "catalog", NAME)
    for k, v in env_only.items():
        monkeypatch.setenv(k, v)
    sql = {
        "runs": "SELECT run_id, status, n_steps FROM runs",
        "dupes": "SELECT count(*) FROM (SELECT run_id, step FROM step_records GROUP BY ALL HAVING count(*) > 1)",
        "spans": "SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans",
        "records": "SELECT count(*), count(DISTINCT run_id) FROM run_records",
    }
    with open_source(f"iceberg:{NAME}").reader() as conn:
        before = {k: sorted(conn.execute(q).fetchall()) for k, q in sql.items()}
    stored = {run_id: (status, n_steps) for run_id, status, n_steps in before["runs"]}
    assert stored == {run_id: (status, steps) for run_id, (_, status, steps) in sent.items()}  # 15 runs, all steps
    assert before["dupes"] == [(0,)]  # no step written twice
    assert before["records"] == [(15, 15)]  # no run twice
    n_spans, distinct = before["spans"][0]
    assert n_spans == distinct > 15 * 2

    # Three processes' commits left many small files; compaction rewrites them without changing a row.
    compacted = cli("compact", "--catalog", NAME, env=env_only)
    assert "data files" in compacted.stdout, compacted.stdout
    with open_source(f"iceberg:{NAME}").reader() as conn:
        assert {k: sorted(conn.execute(q).fetchall()) for k, q in sql.items()} == before
    from looptrace.tracer.store.iceberg import CatalogStore

    files = CatalogStore(NAME).files()
    assert all(len(tasks) <= 16 for tasks in files.values()), {t: len(v) for t, v in files.items()}
