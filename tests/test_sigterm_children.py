"""A ``multiprocessing`` child dies of SIGTERM whichever of its threads takes it (issue 24).

``Tracing`` turns SIGTERM into ``SystemExit`` in the agent's own process. In a child that handler
hung ``Pool.terminate``: a worker's main thread waiting in ``sem_wait`` on the task queue's lock never
ran it when another thread took the signal, so the worker lived on and the parent joined it forever
(1 hang in 7 runs of ``pool:forkserver`` under load). The child must get SIGTERM's default action,
under every start method, including a spawn or forkserver child that makes ``Tracing`` while
importing the main module; the parent keeps ``SystemExit`` (``test_faults.py`` tests what it does).
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from .conftest import PYTHON, ROOT, python_env


def test_terminate_kills_a_child_whose_main_thread_waits_in_c(tmp_path: Path) -> None:
    env = python_env()
    env["TERMINATE_AGENT_DB"] = str(tmp_path / "store.duckdb")
    proc = subprocess.run([PYTHON, "-m", "tests.terminate_agent"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.split("\n") if line)
    assert lines == {"parent": "SystemExit", "fork": str(-signal.SIGTERM), "forkserver": str(-signal.SIGTERM),
                     "spawn": str(-signal.SIGTERM)}, proc.stderr[-3000:]
