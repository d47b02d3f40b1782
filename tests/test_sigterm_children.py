"""A ``multiprocessing`` child dies of SIGTERM whichever of its threads takes it (issue 24).

``Tracing`` turns SIGTERM into ``SystemExit`` in the agent's own process. In a child that handler
hung ``Pool.terminate``: a worker's main thread waiting in ``sem_wait`` on the task queue's lock never
ran it when another thread took the signal, so the worker lived on and the parent joined it forever
(5 hangs in 34 runs of ``pool:forkserver`` under load). The child must get SIGTERM's default action,
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


def _blocks_quiet_signals(native_id: int) -> bool:
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    blocked = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:")), 16)
    return all(blocked & (1 << (s - 1)) for s in (signal.SIGTERM, signal.SIGINT))


def test_tracer_threads_leave_sigterm_and_sigint_to_the_main_thread(tmp_path: Path) -> None:
    """Every thread looptrace starts (the store's and the OTLP processor's workers, the run-start
    writer, the OTLP flush helper) blocks them, so the kernel hands them to the main thread."""
    import threading

    from looptrace.tracer import Tracing

    before = set(threading.enumerate())
    tracing = Tracing(tmp_path / "store.duckdb", otlp_endpoint="http://127.0.0.1:9", handle_sigterm=False)
    try:
        with tracing.run("a", task="t", model="scripted") as run:
            run.finish("ok", answer="a")
        tracing.flush()  # starts the OTLP flush helper (the endpoint refuses: it may still be running)
        started = [t for t in set(threading.enumerate()) - before if t.native_id is not None]
        assert len(started) >= 3, started  # the two processors' workers and the run-start writer
        assert [t.name for t in started if not _blocks_quiet_signals(t.native_id)] == []
    finally:
        tracing.shutdown(compact=False)
