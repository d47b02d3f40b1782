"""No silent empty runs: a file with messages that map to no step is skipped with its reason.

Each registered built-in format gets a file that holds messages but no assistant or agent turn (the
shape of the 58 multi-agent transcripts that once imported as runs with 0 steps, each "ended
normally"). Every one must be skipped with a reason, and the files with turns beside them imported
with steps; the CLI says how many runs came in with no steps.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looptrace.tracer.ingest.files.formats import DESCRIPTIONS, PARSERS, parse_file
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store

from .conftest import ROOT, python_env

ASK = {"role": "user", "content": "Fix the failing test in utils.py."}
SYSTEM = {"role": "system", "content": "You are a helpful agent."}

# format -> (file name, a document with messages and no turn that maps to a step)
NO_TURNS: dict[str, tuple[str, Any]] = {
    "swe-agent": ("a.traj", {"trajectory": [], "history": [SYSTEM, ASK], "info": {}}),
    "mini-swe-agent": ("b.traj.json", {"trajectory_format": "mini-swe-agent-1", "messages": [SYSTEM, ASK],
                                       "info": {"exit_status": "Submitted"}}),
    "openai-chat": ("c.json", {"messages": [SYSTEM, ASK, {"role": "tool", "tool_call_id": "x", "content": "ok"}]}),
    "chat": ("d.json", {"history": [{"role": "human", "content": "How many albums?"}, ASK]}),
    "inspect-ai": ("e.json", {"version": 2, "status": "success", "eval": {"task": "t", "model": "m"},
                              "samples": [{"id": 1, "epoch": 1, "input": "hi", "messages": [SYSTEM, ASK]}]}),
    "openhands": ("f.json", {"history": [{"id": 0, "source": "user", "action": "message",
                                         "args": {"content": "Fix the test."}, "message": "Fix the test."}]}),
    "claude-code": ("g.jsonl", [{"type": "user", "sessionId": "s1", "uuid": "u1", "timestamp": "2025-01-01T00:00:00Z",
                                 "message": {"role": "user", "content": "Fix the test."}}]),
    "codex-cli": ("rollout-i.jsonl", [
        {"timestamp": "2025-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s2", "cwd": "/w"}},
        {"timestamp": "2025-01-01T00:00:01Z", "type": "response_item",
         "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}}]),
    "gemini-cli": ("session-j.jsonl", [
        {"sessionId": "s3", "projectHash": "p", "startTime": "2025-01-01T00:00:00Z", "kind": "main"},
        {"id": "m1", "timestamp": "2025-01-01T00:00:01Z", "type": "user", "content": [{"text": "Fix it."}]}]),
    "autogen-agentchat": ("h.json", {"messages": [{"source": "user", "type": "TextMessage", "content": "Add 2 and 2."}],
                                     "stop_reason": None}),
}
# Formats in which every entry is an agent's turn: a CrewAI task log entry is a task an agent ran.
EVERY_ENTRY_A_TURN = {"crewai"}


def _write(folder: Path, name: str, doc: Any) -> Path:
    path = folder / name
    path.write_text("\n".join(json.dumps(e) for e in doc) if name.endswith(".jsonl") else json.dumps(doc))
    return path


def test_every_message_format_is_covered() -> None:
    # otlp-json and the span exports carry spans, not messages; every other built-in format is here
    spans = {"otlp-json", "span-tree", "phoenix-spans", "jaeger-json", "zipkin-json", "otel-sdk-json"}
    sessions = {"claude-code", "codex-cli", "gemini-cli"}  # JSONL session formats, parsed whole
    assert set(NO_TURNS) | EVERY_ENTRY_A_TURN == set(PARSERS) | sessions == set(DESCRIPTIONS) - spans


@pytest.mark.parametrize("fmt", list(NO_TURNS))
def test_a_file_with_messages_and_no_turn_is_skipped_with_a_reason(tmp_path: Path, fmt: str) -> None:
    name, doc = NO_TURNS[fmt]
    path = _write(tmp_path, name, doc)
    report = import_paths(Store(tmp_path / "s.duckdb"), [path])
    assert report.runs_imported == 0 and report.runs_without_steps == 0
    (skipped, reason), = report.skipped
    assert skipped == str(path.resolve()) and ("no steps" in reason or "no agent turns" in reason
                                               or "no assistant turns" in reason), reason
    with pytest.raises(Exception, match="no steps|no agent turns|no assistant turns"):
        parse_file(path)


def test_the_cli_warns_about_runs_with_no_steps(tmp_path: Path) -> None:
    # a run with no step but a recorded end (an API error before the first turn) is imported: it is
    # evidence of how the run ended. The CLI says so.
    _write(tmp_path, "crashed.json", {"messages": [ASK], "status": "error", "error": "APIConnectionError: refused"})
    _write(tmp_path, "fine.json", {"messages": [ASK, {"role": "assistant", "content": "Fixed: the test passes."}]})
    done = subprocess.run([sys.executable, "-m", "looptrace.tracer.cli", "import", str(tmp_path), "--db",
                           str(tmp_path / "s.duckdb")], cwd=ROOT, env=python_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "runs imported: 2" in done.stdout
    assert "warning: 1 of the runs imported have no steps" in done.stdout
