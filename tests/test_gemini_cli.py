"""Gemini CLI session logs written by the real CLI (`@google/gemini-cli`, pinned), imported and diagnosed.

`tests/gemini_writer.py` runs `gemini -p` offline against the scripted Gemini API on 127.0.0.1: a
normal session, one stuck on the same failing command (the CLI's own loop detector stops it), one
whose model calls fail, one interrupted with SIGINT mid-command. `make agent-clis` installs the CLI;
where it is missing these tests skip with the reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.store import Store

from . import gemini_writer
from .conftest import python_env, query

pytestmark = pytest.mark.slow  # four CLI sessions (~40 s, the failing one waits out the CLI's retry)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> gemini_writer.Written:
    reason = gemini_writer.missing_reason()
    if reason:
        pytest.skip(reason)
    return gemini_writer.write_sessions(tmp_path_factory.mktemp("gemini"))


def _import(db: Path, folder: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "looptrace.tracer.cli", "import", str(folder), "--db", str(db)],
                          env=python_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def db(written: gemini_writer.Written) -> Path:
    path = written.home / "s.duckdb"
    out = _import(path, written.home / ".gemini" / "tmp")
    assert "runs imported: 4" in out and "runs by format: gemini-cli 4" in out, out
    analyze_store(Store(path))
    return path


def _run(db: Path, written: gemini_writer.Written, name: str) -> dict[str, Any]:
    cols = ["run_id", "status", "error", "answer", "model", "task", "n_steps", "input_tokens", "output_tokens"]
    (row,) = query(db, f"SELECT {', '.join(cols)} FROM runs WHERE source = ?", [str(written.sessions[name])])
    run = dict(zip(cols, row))
    run["label"] = query(db, "SELECT label FROM diagnoses WHERE run_id = ? AND is_primary", [run["run_id"]])[0][0]
    run["calls"] = query(db, "SELECT step, tool, CAST(args AS VARCHAR), observation, is_error, error_type, thought "
                             "FROM steps WHERE run_id = ? ORDER BY step, call_index", [run["run_id"]])
    return run


def test_the_script_calls_the_shell_tool_the_cli_declares(written: gemini_writer.Written) -> None:
    assert "run_shell_command" in written.tools


def test_a_normal_session_is_one_run_with_its_commands_and_tokens(db: Path, written: gemini_writer.Written) -> None:
    run = _run(db, written, "normal")
    assert (run["status"], run["label"]) == ("ok", "ok")
    assert run["task"] == "Write notes.txt with a greeting and show it."
    assert run["answer"] == "notes.txt says: hello from gemini."
    calls = run["calls"]
    assert [(c[0], c[1], json.loads(c[2]) if c[2] else None) for c in calls] == [
        (1, "run_shell_command", {"command": "printf 'hello from gemini\\n' > notes.txt"}),
        (2, "run_shell_command", {"command": "cat notes.txt"}), (3, None, None)]
    assert calls[0][6] == "I will write the note, then read it back."
    assert "hello from gemini" in calls[1][3] and "PGID" not in calls[1][3]
    records = {}
    for line in written.sessions["normal"].read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "gemini":
            records[record["id"]] = record["tokens"]
    llm = query(db, "SELECT step, input_tokens, cache_read_tokens, output_tokens FROM llm_calls WHERE run_id = ? "
                    "ORDER BY step", [run["run_id"]])
    assert llm == [(i + 1, t["input"], t["cached"], t["output"] + t["thoughts"])
                   for i, t in enumerate(records.values())]
    assert llm[1][2] > 0 and run["input_tokens"] == sum(t["input"] for t in records.values())


def test_a_session_the_clis_loop_detector_stopped_is_stagnation(db: Path, written: gemini_writer.Written) -> None:
    run = _run(db, written, "stuck")
    assert (run["status"], run["label"]) == ("stagnated", "stagnation")
    assert "Potential loop detected" in run["error"]
    commands = [json.loads(c[2])["command"] for c in run["calls"]]
    assert len(commands) >= 4 and set(commands) == {"cat build.log"}
    assert all(c[4] and c[5] == "command_error" and "No such file" in c[3] for c in run["calls"])
    assert len({c[3] for c in run["calls"]}) == 1  # the same result each time, once the process group is dropped


def test_a_session_whose_model_calls_fail_is_never_ok(db: Path, written: gemini_writer.Written) -> None:
    # The CLI writes nothing of the failure into the log (its error report goes to /tmp); it rolls
    # the unanswered turn out of its history, and that rollback is the evidence left.
    assert written.requests["model_error"] == gemini_writer.ATTEMPTS
    run = _run(db, written, "model_error")
    assert (run["status"], run["label"], run["n_steps"]) == ("incomplete", "incomplete", 0)
    assert "rolled this turn back" in run["error"] and run["task"] == "Fail: anything at all."


def test_a_session_interrupted_mid_command_is_not_ok(db: Path, written: gemini_writer.Written) -> None:
    run = _run(db, written, "interrupted")
    assert run["status"] == "incomplete" and run["label"] in ("incomplete", "error")
    assert run["n_steps"] == 1  # the response that asked for the command; the CLI records calls only once run


def test_importing_again_adds_nothing(db: Path, written: gemini_writer.Written) -> None:
    out = _import(db, written.home / ".gemini" / "tmp")
    assert "runs imported: 0" in out and "already present: 4" in out, out
