"""``looptrace analyze`` output: sorted by run start, wrapped not cut, CSV and JSON, plurals right."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from looptrace.tracer.ingest.files.importing import write_trajectories
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query

T0 = datetime(2026, 1, 2, 10, 0, 0)
LONG_ARG = "grep -rn 'a_rather_long_pattern_name' src/some/deeply/nested/package/module_with_a_long_name.py"


def looptrace(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    env = {**python_env(), "COLUMNS": str(columns)}
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


def trajectory(name: str, minutes: int, steps: list[ImportedStep], status: str = "ok") -> Trajectory:
    return Trajectory(source=name, agent=f"agent-{name}", status=status, steps=steps,
                      started_at=T0 + timedelta(minutes=minutes), ended_at=T0 + timedelta(minutes=minutes + 1))


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("out") / "s.duckdb"
    stuck = [ImportedStep(step=i + 1, tool="bash", args={"command": LONG_ARG}, observation="no match")
             for i in range(6)]
    fine = [ImportedStep(step=1, tool="read", args={"path": "a"}, observation="x")]
    write_trajectories(Store(path), [trajectory("late", 30, fine), trajectory("early", 0, stuck, "max_iters"),
                                     trajectory("middle", 10, fine)])
    return path


def test_table_is_sorted_by_run_start_and_wraps_instead_of_cutting(db: Path) -> None:
    out = looptrace("analyze", "--db", str(db), columns=80).stdout
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert re.findall(r"agent-(\w+)", out) == ["early", "middle", "late"]
    # The stagnation row names the command with its arguments, wrapped over lines but whole.
    assert "a_rather_long_pattern_name" in "".join(line.strip("│ ") for line in lines)
    assert "ran 6 times in a row" in re.sub(r"[\s│]+", " ", out)
    assert lines[-1] == "3 runs analysed: ok 2, stagnation 1"


def test_one_run_is_one_run(db: Path, tmp_path: Path) -> None:
    one = tmp_path / "one.duckdb"
    write_trajectories(Store(one), [trajectory("solo", 0, [ImportedStep(step=1, thought="hi")])])
    assert looptrace("analyze", "--db", str(one)).stdout.splitlines()[-1] == "1 run analysed: ok 1"


def test_full_shows_the_whole_explanation_and_secondary_labels(db: Path) -> None:
    out = re.sub(r"[\s│]+", " ", looptrace("analyze", "--db", str(db), "--full", columns=100).stdout)
    assert "with the same result each time. (also: cap_hit)" in out


def test_csv_and_json(db: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(looptrace("analyze", "--db", str(db), "--format", "csv").stdout)))
    assert [r["agent"] for r in rows] == ["agent-early", "agent-middle", "agent-late"]
    assert rows[0]["label"] == "stagnation" and rows[0]["secondary"] == "cap_hit"
    assert "bash" in rows[0]["explanation"] and "a_rather_long_pattern_name" in rows[0]["explanation"]
    data = json.loads(looptrace("analyze", "--db", str(db), "--format", "json").stdout)
    assert [d["agent"] for d in data] == ["agent-early", "agent-middle", "agent-late"]
    assert data[0]["diagnoses"][0]["label"] == "stagnation" and data[0]["started_at"].startswith("2026-01-02")


def test_a_loop_the_agent_recovered_from_shows_beside_its_ok(tmp_path: Path) -> None:
    """Wasted calls are worth a line even when the run ended well: the short table names the loop."""
    from looptrace.replay.analyze_output import Row
    from looptrace.replay.analyzer import analyze_store

    steps = [ImportedStep(step=1, tool="read_file", args={"path": "notes.txt"}, observation="deploy: Friday")]
    steps += [ImportedStep(step=i, tool="read_file", args={"path": "notes.md"}, is_error=True,
                           observation="FileNotFoundError: notes.md") for i in (2, 3, 4)]
    steps += [ImportedStep(step=5, tool="final_answer", args={"answer": "Friday"})]
    store = Store(tmp_path / "s.duckdb")
    write_trajectories(store, [Trajectory(source="t.json", agent="a", status="ok", steps=steps)])
    [result] = analyze_store(store)
    assert [d.label for d in result.diagnoses] == ["ok", "stagnation"]
    assert Row(result, "a", None).evidence(full=False).endswith("(also: stagnation, steps 2-4)")


def test_run_takes_a_unique_prefix_and_says_so_when_it_names_none(db: Path) -> None:
    run_id = query(db, "SELECT run_id FROM runs WHERE agent = 'agent-early'")[0][0]
    out = looptrace("analyze", "--db", str(db), "--run", run_id[:12], "--format", "json").stdout
    assert [(d["agent"], d["diagnoses"][0]["label"]) for d in json.loads(out)] == [("agent-early", "stagnation")]
    missing = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "analyze", "--db", str(db), "--run", "zz-none"],
                             capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=60)
    assert missing.returncode == 1 and missing.stderr.strip() == "error: no run 'zz-none' in this store", missing


def test_the_short_table_keeps_the_error_a_run_ended_on(tmp_path: Path) -> None:
    """"The run ended on an error" alone loses the cause: the short form keeps what its colon introduces
    (the first line, cut), and a first sentence that introduces nothing is shown as before."""
    from looptrace.replay.analyze_output import Row
    from looptrace.replay.analyzer import analyze_store

    store = Store(tmp_path / "s.duckdb")
    cause = "RateLimitError: 429 Too Many Requests for model gpt-4o"
    write_trajectories(store, [
        Trajectory(source="e.json", agent="a", status="error", error=cause + "\nTraceback (most recent call last): ...",
                   steps=[ImportedStep(step=1, tool="search", args={"q": "x"}, observation="3 hits")]),
        Trajectory(source="l.json", agent="a", status="error", error="x" * 400,
                   steps=[ImportedStep(step=1, tool="search", args={"q": "y"}, observation="3 hits")])])
    short = {r.run_id: Row(r, "a", None).evidence(full=False) for r in analyze_store(store)}
    by_source = dict(query(store.path, "SELECT source, run_id FROM runs"))
    assert short[by_source["e.json"]].rstrip(".") == f"step 1: The run ended on an error at step 1: {cause}", short
    long_one = short[by_source["l.json"]]
    assert long_one.startswith("step 1: The run ended on an error at step 1: xxx") and long_one.endswith("x…")
    assert len(long_one) < 250


def test_json_output_is_one_run_a_line_and_holds_every_field() -> None:
    """The JSON is written a run a line (json's C encoder); what it holds is what the fields are, a
    nested dataclass as its fields and a datetime as text, as ``dataclasses.asdict`` gave before."""
    from dataclasses import asdict, dataclass

    from looptrace.replay.analyze_output import Row, json_text
    from looptrace.replay.analyzer import RunDiagnoses
    from looptrace.replay.analyzer.views import Diagnosis

    @dataclass
    class Spot:
        step: int
        at: datetime

    when = datetime(2026, 12, 5, 4, 0, 0)
    diagnoses = [Diagnosis("stagnation", 3, 9, "repeated", {"steps": (3, 4), "spot": Spot(3, when)}, True),
                 Diagnosis("cap_hit", 10, 10, "capped", {}, False)]
    rows = [Row(RunDiagnoses("r1", "max_iters", diagnoses), "agent-a", when), Row(RunDiagnoses("r2", "ok", []), None, None)]
    text = json_text(rows)
    assert text.splitlines()[0] == "[" and text.splitlines()[-1] == "]" and len(text.splitlines()) == 4
    expected = [{"run_id": r.result.run_id, "agent": r.agent, "started_at": r.started_at, "status": r.result.status,
                 "diagnoses": [asdict(d) for d in r.result.diagnoses]} for r in rows]
    assert json.loads(text) == json.loads(json.dumps(expected, default=str))
    assert json.loads(text)[0]["diagnoses"][0]["evidence"]["spot"] == {"step": 3, "at": "2026-12-05 04:00:00"}
    assert json_text([]) == "[]\n"
