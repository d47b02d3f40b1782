"""Many writers, live readers, crashes: real processes on one store."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query


# Conditions are waited for up to this long; how fast steps become visible is measured in bench/, not here.
PATIENCE = 60.0


def spawn(db: Path, agent: str, steps: int, calls: int, pause: float = 0.0,
          hold_at: int | None = None) -> subprocess.Popen[str]:
    held = [] if hold_at is None else [str(hold_at)]
    return subprocess.Popen(
        [PYTHON, "-m", "tests.proc_agent", str(db), agent, str(steps), str(calls), str(pause), *held],
        stdin=subprocess.PIPE if held else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=python_env(), cwd=ROOT,
    )


def steps_of(db: Path, agent: str) -> int:
    return query(db, "SELECT count(*) FROM steps s JOIN runs r USING (run_id) WHERE r.agent = ?", [agent])[0][0]


def until_steps(db: Path, agent: str, at_least: int) -> int:
    """Steps of ``agent`` in the store once there are ``at_least`` (polled; fails after PATIENCE s)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        if db.exists() or Store(db).segments_dir.exists():
            n = steps_of(db, agent)
            if n >= at_least:
                return n
        assert time.monotonic() < deadline, f"{agent}: fewer than {at_least} steps visible after {PATIENCE} s"
        time.sleep(0.1)


@pytest.mark.slow
def test_eight_writers_and_a_live_reader_lose_nothing(db: Path) -> None:
    procs = [spawn(db, f"agent{i}", 200, 2, 0.002) for i in range(8)]
    seen: list[int] = []
    while any(p.poll() is None for p in procs):
        # A reader (as the viewer and `looptrace sql` do) while all eight write.
        if db.exists() or Store(db).segments_dir.exists():
            seen.append(query(db, "SELECT count(*) FROM steps")[0][0])
        time.sleep(0.2)
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert "Traceback" not in err and "lock" not in err.lower(), err
        assert out.rstrip().endswith("done")
    assert seen == sorted(seen) and seen[-1] > 0, "the live reader saw steps arrive, never going back"
    assert query(db, "SELECT count(*), count(DISTINCT (run_id, step, call_index)) FROM steps") == [(3200, 3200)]
    assert query(db, "SELECT status, count(*), sum(n_steps) FROM runs GROUP BY ALL") == [("ok", 8, 1600)]
    assert query(db, "SELECT count(*), count(DISTINCT span_id) FROM spans")[0][0] == 8 * (1 + 200 * 3)
    assert query(db, "SELECT sum(spans_dropped), sum(write_errors) FROM writer_stats") == [(0, 0)]


@pytest.mark.slow
def test_new_steps_are_visible_while_the_writer_runs(db: Path) -> None:
    proc = spawn(db, "slow", 40, 1, 0.0, hold_at=10)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            if line.startswith("step 10"):
                break
        # The writer is held mid-run (after step 10): its steps are visible while it still runs.
        assert until_steps(db, "slow", 10) == 10
        assert query(db, "SELECT status FROM runs") == [("incomplete",)]
        proc.stdin.close()
    finally:
        proc.wait(PATIENCE)
    assert query(db, "SELECT status, n_steps FROM runs") == [("ok", 40)]


@pytest.mark.slow
def test_kill_minus_nine_keeps_what_was_flushed(db: Path) -> None:
    finished = spawn(db, "finished", 5, 1)
    assert finished.wait(PATIENCE) == 0
    victim = spawn(db, "victim", 10_000, 1, 0.01)
    assert victim.stdout is not None
    for line in victim.stdout:
        if line.startswith("step 50"):
            break
    # The batch processor flushes every 0.1 s: wait until 50 steps are in, however loaded the machine.
    before = until_steps(db, "victim", 50)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(PATIENCE)
    rows = query(db, "SELECT agent, status, n_steps FROM runs ORDER BY agent")
    assert rows[0] == ("finished", "ok", 5)
    # ``before`` counts rows of the ``steps`` view, which show a tool call whose step span was not yet
    # written (its step ends after it, maybe in the next batch); ``runs.n_steps`` counts step records
    # alone: compared like with like.
    assert rows[1][:2] == ("victim", "incomplete") and steps_of(db, "victim") >= before
    # The killed writer left no half-written segment behind that anyone reads, and the store compacts.
    Store(db).compact()
    assert query(db, "SELECT count(*) FROM steps WHERE tool = 'echo'")[0][0] >= before + 5
