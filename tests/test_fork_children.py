"""Forked and spawned children are traced (issue 18, case 5), and a program that forks never hangs
(issue 24): each start method with real processes, counting the rows they stored.

Issue 18: 3 ``multiprocessing.Process`` children and 4 ``Pool`` tasks (fork), 42 steps, stored 0: the
flush registered for the child was cleared by ``multiprocessing``'s own start-up before it ran, and
``os._exit`` skipped everything else. Issue 24: with ``Tracing(...)`` made at import time and a run
traced in the parent before the fork, the same program hung in 6 of 10 tries (a lock held by one of
the parent's threads at the moment of ``fork()``), so the ``--parent`` shape is repeated many times
in a row, under whatever load the rest of the suite puts on the machine.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, ROOT, python_env, query
from .fork_agent import CHILDREN, STEPS

MODES = ["process:fork", "process:forkserver", "process:spawn", "pool:fork", "pool:forkserver", "pool:spawn",
         "executor:fork", "executor:spawn", "os.fork"]
REPEATS = {"issue24": 10}  # the program; each other mode with a parent run: 3 times in a row
HANG = 60  # seconds: a run of the program takes ~3 s on an idle machine; more is a hang


def _run(db: Path, mode: str, parent: bool) -> None:
    env = python_env()
    env["PYTHONFAULTHANDLER"] = "1"  # a hang is ended by SIGABRT below: every process prints its threads
    if parent:
        env["FORK_AGENT_DB"] = str(db)
    args = [PYTHON, "-m", "tests.fork_agent", str(db), mode, *(["--parent"] if parent else [])]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGABRT)
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"{mode}: hung (no exit within {HANG} s); threads of every process:\n{err[-20000:]}")
    assert proc.returncode == 0 and out.strip() == "done", err[-3000:]


def _check(db: Path, n: int) -> None:
    runs = query(db, "SELECT count(*), count(*) FILTER (status = 'ok'), sum(n_steps) FROM runs")
    steps = query(db, "SELECT count(*), count(DISTINCT (run_id, step)) FROM steps")
    assert runs == [(n, n, n * STEPS)]
    assert steps == [(n * STEPS, n * STEPS)]
    assert query(db, "SELECT count(*) - count(DISTINCT span_id) FROM spans") == [(0,)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_children_record_their_runs_and_steps(db: Path, mode: str) -> None:
    _run(db, mode, parent=False)
    _check(db, CHILDREN[mode.partition(":")[0]])


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["issue24", *MODES])
def test_a_parent_that_traced_before_forking_never_hangs(tmp_path: Path, mode: str) -> None:
    for i in range(REPEATS.get(mode, 3)):
        db = tmp_path / f"store-{i}.duckdb"
        _run(db, mode, parent=True)
        _check(db, CHILDREN[mode.partition(":")[0]] + 1)  # and the parent's own run
