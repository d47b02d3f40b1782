"""Forked and spawned children are traced (issue 18, case 5): each start method with real processes,
counting the rows they stored. Before, 3 ``multiprocessing.Process`` children and 4 ``Pool`` tasks
(fork), 42 steps, stored 0: the flush registered for the child was cleared by ``multiprocessing``'s
own start-up before it ran, and ``os._exit`` skipped everything else.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, ROOT, python_env, query
from .fork_agent import CHILDREN, STEPS

MODES = ["process:fork", "process:forkserver", "process:spawn", "pool:fork", "pool:forkserver", "pool:spawn",
         "executor:fork", "executor:spawn", "os.fork"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_children_record_their_runs_and_steps(db: Path, mode: str) -> None:
    proc = subprocess.run([PYTHON, "-m", "tests.fork_agent", str(db), mode], capture_output=True, text=True,
                          env=python_env(), cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr[-3000:]
    n = CHILDREN[mode.partition(":")[0]]
    runs = query(db, "SELECT count(*), count(*) FILTER (status = 'ok'), sum(n_steps) FROM runs")
    steps = query(db, "SELECT count(*), count(DISTINCT (run_id, step)) FROM steps")
    print(f"{mode}: runs, ok, steps = {runs[0]}")
    assert runs == [(n, n, n * STEPS)]
    assert steps == [(n * STEPS, n * STEPS)]
    assert query(db, "SELECT count(*) - count(DISTINCT span_id) FROM spans") == [(0,)]
