"""Codex CLI rollouts written by the real CLI (`@openai/codex`, pinned), imported and diagnosed.

`tests/codex_writer.py` runs `codex exec` offline against the scripted Responses API on 127.0.0.1:
a normal session, one stuck on the same failing command, one whose model calls all fail, one
interrupted with SIGINT mid-command, one resumed, one forked. The CLI is installed by `make agent-clis`
(npm); where it is missing these tests skip with the reason, and under CI=true they are required
(README, "What CI requires").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.files.formats import parse_file
from looptrace.tracer.store import Store

from . import codex_writer
from .conftest import ROOT, python_env, query

pytestmark = pytest.mark.slow  # the CLI runs seven sessions (~10 s), once for the module


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> codex_writer.Written:
    reason = codex_writer.missing_reason()
    if reason:
        pytest.skip(reason)
    return codex_writer.write_sessions(tmp_path_factory.mktemp("codex") / ".codex")


def _import(db: Path, *paths: Path, home: Path | None = None, line: str | None = None) -> str:
    env = python_env() | ({"HOME": str(home)} if home else {})
    cmd = ["bash", "-c", line] if line else [sys.executable, "-m", "looptrace.tracer.cli", "import",
                                               *map(str, paths), "--db", str(db)]
    done = subprocess.run(cmd, cwd=db.parent, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def db(written: codex_writer.Written) -> Path:
    path = written.home.parent / "s.duckdb"
    out = _import(path, written.home / "sessions")
    assert "runs imported: 6" in out and "6 seen, 0 skipped" in out, out
    analyze_store(Store(path))
    return path


def _run(db: Path, written: codex_writer.Written, name: str) -> dict[str, Any]:
    cols = ["run_id", "status", "error", "answer", "model", "task", "n_steps", "input_tokens", "output_tokens",
            "forked_from", "n_llm_calls"]
    (row,) = query(db, f"SELECT {', '.join(cols)} FROM runs WHERE source = ?", [str(written.sessions[name])])
    run = dict(zip(cols, row))
    (attributes,) = query(db, "SELECT CAST(attributes AS VARCHAR) FROM run_records WHERE run_id = ?",
                          [run["run_id"]])[0]
    run["attributes"] = json.loads(attributes)
    run["label"] = query(db, "SELECT label FROM diagnoses WHERE run_id = ? AND is_primary", [run["run_id"]])[0][0]
    return run


def _calls(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    return query(db, "SELECT step, call_index, tool, CAST(args AS VARCHAR), observation, is_error, error_type, "
                     "thought FROM steps WHERE run_id = ? ORDER BY step, call_index", [run_id])


def _records(path: Path, kind: str) -> list[dict[str, Any]]:
    return [r["payload"] for line in path.read_text().splitlines() if (r := json.loads(line))["type"] == kind]


def test_the_script_calls_the_shell_tool_the_cli_declares(written: codex_writer.Written) -> None:
    assert "exec_command" in written.tools
    for path in written.sessions.values():
        for item in _records(path, "response_item"):
            if item["type"] == "function_call":
                assert item["name"] in written.tools


def test_a_normal_session_is_one_run_with_every_command_and_each_responses_tokens(
        db: Path, written: codex_writer.Written) -> None:
    run = _run(db, written, "normal")
    assert (run["status"], run["label"], run["model"]) == ("ok", "ok", "scripted-model")
    assert run["answer"] == "notes.txt says: hello from codex (17 bytes)."
    assert run["task"] == "Write notes.txt with a greeting and show what it holds."
    attributes = run["attributes"]
    assert attributes["cli_version"] == codex_writer.CODEX_VERSION
    assert attributes["cwd"].endswith("work/normal") and attributes["originator"] == "codex_exec"
    calls = _calls(db, run["run_id"])
    assert [(c[0], c[1], c[2], json.loads(c[3]) if c[3] else None) for c in calls] == [
        (1, 0, "exec_command", {"cmd": "printf 'hello from codex\\n' > notes.txt"}),
        (2, 0, "exec_command", {"cmd": "cat notes.txt"}),
        (2, 1, "exec_command", {"cmd": "wc -c notes.txt"}),
        (3, 0, None, None),
    ]
    assert calls[0][7] == "I will write the note first, then read it back."  # the reasoning summary
    assert calls[3][7] == run["answer"]
    assert "Process exited with code 0" in calls[1][4] and calls[1][4].endswith("hello from codex\n")
    assert "17 notes.txt" in calls[2][4] and not any(c[5] for c in calls)
    assert "Chunk ID" not in calls[1][4]
    # tokens: one LLM call per response, each the CLI's own record of that response
    records = _records(written.sessions["normal"], "token_usage_record")
    assert len(records) == run["n_llm_calls"] == 3
    llm = query(db, "SELECT step, input_tokens, cache_read_tokens, output_tokens FROM llm_calls WHERE run_id = ? "
                    "ORDER BY step", [run["run_id"]])
    assert llm == [(i + 1, r["usage"]["input_tokens"], r["usage"]["cached_input_tokens"], r["usage"]["output_tokens"])
                   for i, r in enumerate(records)]
    assert llm[1][2] > 0  # the second request starts with the first: the scripted provider's cache
    events = [json.loads(e) for (e,) in query(db, "SELECT CAST(events AS VARCHAR) FROM steps WHERE run_id = ? "
                                                 "AND call_index = 0 ORDER BY step", [run["run_id"]])]
    reasoning = [next(e for e in ev if e["name"] == "usage")["attributes"]["reasoning_output_tokens"] for ev in events]
    assert reasoning == [r["usage"]["reasoning_output_tokens"] for r in records] and reasoning[0] > 0 == reasoning[2]
    assert run["input_tokens"] == sum(r["usage"]["input_tokens"] for r in records)
    assert run["output_tokens"] == sum(r["usage"]["output_tokens"] for r in records)


def test_a_session_stuck_on_the_same_failing_command_is_stagnation(db: Path, written: codex_writer.Written) -> None:
    run = _run(db, written, "stuck")
    assert run["label"] == "stagnation" and run["status"] == "ok"  # the CLI ended the turn; the loop is the story
    calls = [c for c in _calls(db, run["run_id"]) if c[2] is not None]
    assert len(calls) == codex_writer.STUCK_CALLS
    assert all(json.loads(c[3]) == {"cmd": "cat build.log"} and c[5] and c[6] == "command_error" for c in calls)
    assert all("No such file or directory" in c[4] and "Process exited with code 1" in c[4] for c in calls)
    ((first, last, evidence),) = query(db, "SELECT first_step, last_step, CAST(evidence AS VARCHAR) FROM diagnoses "
                                           "WHERE run_id = ? AND is_primary", [run["run_id"]])
    assert (first, last) == (1, codex_writer.STUCK_CALLS)
    assert json.loads(evidence)["repeats"] == codex_writer.STUCK_CALLS


def test_a_session_whose_model_calls_fail_is_an_error(db: Path, written: codex_writer.Written) -> None:
    assert written.requests["model_error"] == 1 + codex_writer.RETRIES  # the CLI retried, then gave up
    run = _run(db, written, "model_error")
    assert run["status"] == "error" and run["label"] == "error" and run["n_steps"] == 0
    assert run["error"] and run["attributes"]["turns"][0]["error_kind"] == "internal_server_error"
    assert run["error"].endswith("(internal_server_error)"), run["error"]  # the CLI's words say "high demand"


def test_a_session_interrupted_mid_command_is_not_ok(db: Path, written: codex_writer.Written) -> None:
    run = _run(db, written, "interrupted")
    assert run["status"] == "interrupted" and run["label"] in ("error", "incomplete")
    ((step, _, tool, args, observation, is_error, error_type, _),) = _calls(db, run["run_id"])
    assert (tool, json.loads(args)["cmd"]) == ("exec_command", "touch .running && sleep 60")
    assert "aborted by user" in observation and is_error and error_type == "command_error"  # killed: 137
    assert run["attributes"]["turns"][-1]["reason"] == "interrupted"


def test_a_resumed_session_is_one_run_with_both_turns(db: Path, written: codex_writer.Written) -> None:
    run = _run(db, written, "resumed")
    assert [t["end"] for t in run["attributes"]["turns"]] == ["ok", "ok"]
    assert run["status"] == "ok" and run["answer"] == "Said two." and run["task"] == "Say one"
    assert [json.loads(c[3])["cmd"] for c in _calls(db, run["run_id"]) if c[2]] == ["echo one", "echo two"]


def test_a_forked_session_is_linked_to_its_origin(db: Path, written: codex_writer.Written) -> None:
    fork, origin = _run(db, written, "forked"), _run(db, written, "normal")
    assert fork["forked_from"] == origin["run_id"] and origin["forked_from"] is None
    # (the session's own `session_id` attribute is redacted by the sink's secret-name rule; its file name has it)
    assert written.sessions["normal"].stem.endswith(fork["attributes"]["forked_from_session"])
    assert fork["status"] == "ok" and fork["answer"] == "notes.txt has 3 words."
    assert [json.loads(c[3])["cmd"] for c in _calls(db, fork["run_id"]) if c[2]] == ["wc -w notes.txt"]


def test_importing_again_adds_nothing(db: Path, written: codex_writer.Written) -> None:
    before = query(db, "SELECT count(*) FROM steps")[0][0]
    out = _import(db, written.home / "sessions")
    assert "runs imported: 0" in out and "already present: 6" in out, out
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM runs") == [(6, 6)]
    assert query(db, "SELECT count(*) FROM steps")[0][0] == before


def test_the_readme_command_finds_the_sessions_under_home(written: codex_writer.Written, tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = set(re.findall(r"`(looptrace import ~/\.codex/sessions)`", readme))
    db = tmp_path / "traces.duckdb"
    out = _import(db, home=written.home.parent, line=f"{Path(sys.executable).parent}/{line} --db {db}")
    assert "runs imported: 6" in out, out
    assert {r[0] for r in query(db, "SELECT DISTINCT agent FROM runs")} == {"codex-cli"}


def test_a_rollout_without_usage_records_takes_each_responses_token_count(
        written: codex_writer.Written, tmp_path: Path) -> None:
    # CLIs before `token_usage_record` wrote only `token_count` events (repeated after each tool
    # result): the same rollout without those records gives the same tokens per response.
    path = written.sessions["normal"]
    older = tmp_path / path.name
    older.write_text("".join(line + "\n" for line in path.read_text().splitlines()
                             if json.loads(line)["type"] != "token_usage_record"))
    fmt, (now,) = parse_file(path)
    _, (then,) = parse_file(older)
    assert fmt == "codex-cli"
    tokens = [(c.step, c.input_tokens, c.cache_read_tokens, c.output_tokens) for c in now.llm_calls]
    assert tokens == [(c.step, c.input_tokens, c.cache_read_tokens, c.output_tokens) for c in then.llm_calls]
    assert len(tokens) == 3


def test_the_makefile_installs_the_version_the_writer_pins() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert f"CODEX_CLI_VERSION := {codex_writer.CODEX_VERSION}\n" in makefile
    assert re.search(r"^test: .*\bagent-clis\b", makefile, re.M)
    assert os.fspath(codex_writer.CODEX_BIN).endswith("build/npm/node_modules/.bin/codex")


def test_a_rollout_cut_off_mid_command_is_incomplete(written: codex_writer.Written, tmp_path: Path) -> None:
    # What a session still running (or a CLI killed with -9) leaves: the lines up to the first call.
    lines = written.sessions["normal"].read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["payload"].get("type") == "function_call")
    (tmp_path / "rollout-cut.jsonl").write_text("\n".join(lines[:cut + 1]) + "\n")
    db = tmp_path / "s.duckdb"
    assert "runs imported: 1" in _import(db, tmp_path)
    analyze_store(Store(db))
    [(status, label, evidence)] = query(db, "SELECT r.status, d.label, CAST(d.evidence AS VARCHAR) FROM runs r "
                                            "JOIN diagnoses d USING (run_id) WHERE d.is_primary")
    assert (status, label) == ("incomplete", "incomplete")
    assert json.loads(evidence)["reason"] == "stops mid-action"


def test_a_rollout_whose_last_write_was_cut_is_imported_incomplete(
    written: codex_writer.Written, tmp_path: Path,
) -> None:
    """A CLI killed mid-write (or a session imported while it writes) leaves its last line cut: the file was
    skipped whole ("invalid JSON"), losing the session. Its whole lines import; it did not end there."""
    whole = written.sessions["normal"].read_bytes()
    (tmp_path / "rollout-cut.jsonl").write_bytes(whole[:-40])  # into the task_complete line
    db = tmp_path / "s.duckdb"
    assert "runs imported: 1" in _import(db, tmp_path)
    [(status, error, answer, cut)] = query(db, "SELECT status, error, answer, attributes->>'cut_line' FROM run_records")
    assert (status, answer) == ("incomplete", None) and cut.startswith("line ") and "cut line" in error
    # A bad line with a newline after it is damage, not a cut write: the file is still refused.
    lines = whole.decode().splitlines(keepends=True)
    damaged = tmp_path / "damaged" / "rollout-bad.jsonl"
    damaged.parent.mkdir()
    damaged.write_text("".join(lines[:3] + ["{not json\n"] + lines[3:]))
    done = subprocess.run([sys.executable, "-m", "looptrace.tracer.cli", "import", str(damaged), "--db",
                           str(tmp_path / "t.duckdb")], env=python_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "line 4: invalid JSON" in done.stdout + done.stderr, done
