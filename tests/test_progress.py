"""Repetition with progress is not stagnation: paging, polling, exit codes, through a real store."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.files.importing import write_trajectories
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
from looptrace.tracer.records.actions import (
    NEAR_OBSERVATION_KEY_SQL, PROGRESS_KEY_SQL, near_observation_key, progress_key,
)
from looptrace.tracer.store import Store

# A 1100-line file viewed 100 lines at a time, the way SWE-agent's scroll_down shows it.
def _name(i: int) -> str:
    return "".join(chr(97 + (i // 26 ** k) % 26) for k in range(3))


SOURCE = [f"    {_name(i)} = compute({_name(i * 7)}, factor={i % 7})" for i in range(1, 1101)]


def page(start: int) -> str:
    lines = SOURCE[start:start + 100]
    head = f"[File: /repo/big.py ({len(SOURCE)} lines total)]\n({start} more lines above)\n"
    return head + "\n".join(f"{start + i + 1}:{line}" for i, line in enumerate(lines))


def poll(percent: int, at: str) -> str:
    return f"job 7f3a: running, {percent}% done (elapsed 12.{percent}s) checked at 2026-01-02T10:{at}Z"


def run(steps: list[tuple[str, str, str, bool]], status: str = "ok") -> Trajectory:
    return Trajectory(source="t.json", agent="a", status=status, steps=[
        ImportedStep(step=i + 1, tool=tool, args={"command": command}, observation=obs, is_error=err)
        for i, (tool, command, obs, err) in enumerate(steps)])


CASES = {
    "scroll_down x11 through a file": (
        [("open", "open big.py", page(0), False)]
        + [("scroll_down", "scroll_down", page(100 * (i + 1)), False) for i in range(11)], "cap_hit"),
    "polling a job that progresses": (
        [("check", "status 7f3a", poll(10 * i, f"{i:02d}:00"), False) for i in range(8)], "cap_hit"),
    "polling a job that is stuck (only the clock moves)": (
        [("check", "status 7f3a", poll(40, f"{i:02d}:00").replace(".40s", f".{i}s"), False) for i in range(8)],
        "stagnation"),
    "the same script, a different exit code each time": (
        [("run", "python job.py", f"<returncode>{i}</returncode>\n", i > 0) for i in range(6)], "cap_hit"),
    "the same failing command, the same error": (
        [("cd", "cd fastxml", f"/bin/bash: line {3000 + 15 * i}: cd: fastxml: No such file or directory", False)
         for i in range(8)], "stagnation"),
    "an edit repeated, the file view changes only in its line count": (
        [("edit", "edit 194:194 +x", page(100).replace("1100 lines", f"{1100 + 11 * i} lines"), False)
         for i in range(8)], "stagnation"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_progress_through_the_store(tmp_path: Path, name: str) -> None:
    steps, expected = CASES[name]
    store = Store(tmp_path / "s.duckdb")
    write_trajectories(store, [run(steps, "max_iters")])
    [result] = analyze_store(store)
    assert result.primary is not None and result.primary.label == expected, result.primary


@pytest.mark.parametrize("text", [
    poll(40, "00:00"), page(300), "/bin/bash: line 32514: cd: x: No such file", "obj at 0x7ffe12ab in 140ms",
    "id 123e4567-e89b-12d3-a456-426614174000\t\n  done", "", "naïve\u00a0text ٣ 12:00:01.5",
])
def test_python_and_sql_keys_agree(text: str) -> None:
    conn = duckdb.connect()
    sql = conn.execute(f"SELECT {PROGRESS_KEY_SQL}, {NEAR_OBSERVATION_KEY_SQL} FROM (SELECT ?::VARCHAR AS observation)",
                       [text]).fetchone()
    assert sql == (progress_key(text), near_observation_key(text))


def test_what_counts_as_progress() -> None:
    assert progress_key(poll(40, "00:00")) != progress_key(poll(50, "00:00"))  # the job moved
    assert progress_key("running (elapsed 12s)") == progress_key("running (elapsed 14.5s)")  # only the clock did
    assert progress_key("<returncode>0</returncode>") != progress_key("<returncode>1</returncode>")
    assert progress_key(page(0)) != progress_key(page(100))  # a new page
    assert near_observation_key("1100 lines total") == near_observation_key("1111 lines total")
    assert progress_key(None) is None and near_observation_key(None) is None
