"""Importing the logs people already have: Inspect AI, mini-swe-agent 2.x, OpenHands, bare message
lists, Claude Code transcripts, and plug-in formats.

Where a format's writer is a package, the fixtures are written at test time by that package
(``tests/inspect_writer.py``, ``tests/mini_writer.py``, each in a child process). OpenHands and Claude
Code have no practical writer package: their fixtures are written here by hand, modelled on the
public formats (OpenHands' serialized events; Claude Code's ``~/.claude/projects`` JSONL lines).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from looptrace.tracer.ingest.files.formats import TrajectoryFormatError, parse_file
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.ingest.files.trajectory import Trajectory
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query


def run_writer(module: str, folder: Path) -> None:
    done = subprocess.run([PYTHON, "-m", module, str(folder)], capture_output=True, text=True,
                          env=python_env(), cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inspect")
    run_writer("tests.inspect_writer", folder)
    return {p.suffix: p for p in folder.iterdir()}


@pytest.fixture(scope="module")
def mini_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("mini")
    run_writer("tests.mini_writer", folder)
    return folder


def by_sample(runs: list[Trajectory]) -> dict[tuple[str, int], Trajectory]:
    return {(t.attributes["sample_id"], t.attributes["epoch"]): t for t in runs}


def calls(t: Trajectory) -> list[tuple[int, str | None, Any, str | None, str | None]]:
    return [(s.step, s.tool, s.args, s.observation, s.error_type) for s in t.steps if s.tool is not None]


# -- Inspect AI ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_inspect_log_one_run_per_sample_and_epoch(inspect_logs: dict[str, Path], suffix: str) -> None:
    fmt, runs = parse_file(inspect_logs[suffix])
    assert fmt == "inspect-ai" and len(runs) == 6
    samples = by_sample(runs)
    assert set(samples) == {(s, e) for s in ("add", "loop", "limit") for e in (1, 2)}
    assert len({t.attributes["eval_id"] for t in runs}) == 1 and len({t.run_id for t in runs}) == 6

    add = samples["add", 1]
    assert add.status == "ok" and add.task == "Add 1 and 2." and add.model == "looptrace-mock/scripted"
    assert calls(add) == [(1, "add", {"x": 1, "y": 2}, "3", None),
                          (2, "divide", {"x": 1, "y": 0}, "division by zero", "tool_error")]
    assert [s.thought for s in add.steps if s.step == 3] == ["The answer is 3.\nChecked twice."]  # real newline
    assert add.answer == "The answer is 3.\nChecked twice."
    assert add.attributes["scores"] == {"includes": "C"} and add.attributes["metadata"] == {"difficulty": "easy"}
    assert len(add.llm_calls) == 3 and all(c.input_tokens and c.output_tokens for c in add.llm_calls)
    assert add.input_tokens == sum(c.input_tokens or 0 for c in add.llm_calls)
    assert add.started_at is not None and add.ended_at is not None and add.started_at <= add.ended_at

    loop = samples["loop", 2]
    assert loop.status == "ok" and [c[1:3] for c in calls(loop)] == [("add", {"x": 2, "y": 2})] * 3

    limit = samples["limit", 1]
    assert limit.status == "max_iters" and "Message limit" in (limit.error or "")
    assert limit.attributes["limit"]["type"] == "message" and limit.attributes["limit"]["limit"] == 8
    assert limit.attributes["scores"] == {"includes": "I"} and len(calls(limit)) == 4


def test_inspect_logs_in_the_store(inspect_logs: dict[str, Path], tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(inspect_logs[".eval"], folder / "a.eval")
    shutil.copy(inspect_logs[".eval"], folder / "same-content-other-name.eval")
    report = import_paths(Store(db), [folder])
    assert (report.runs_imported, report.runs_present) == (6, 6)  # the copy adds nothing
    statuses = query(db, "SELECT status, count(*) FROM runs GROUP BY ALL ORDER BY 1")
    assert statuses == [("max_iters", 2), ("ok", 4)]
    llm = query(db, "SELECT count(*), count(input_tokens), min(input_tokens) > 0 FROM llm_calls")
    assert llm == [(2 * (3 + 4 + 4), 2 * (3 + 4 + 4), True)]
    errors = query(db, "SELECT tool, error_type, observation FROM tool_calls WHERE is_error")
    assert errors == [("divide", "tool_error", "division by zero")] * 2


def test_a_zip_that_is_not_an_inspect_log(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "x.eval", "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(TrajectoryFormatError, match="not an Inspect log"):
        parse_file(tmp_path / "x.eval")
    (tmp_path / "y.eval").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(TrajectoryFormatError, match="not a zip archive"):
        parse_file(tmp_path / "y.eval")


# -- mini-swe-agent 2.x --------------------------------------------------------------------------------


def test_mini_swe_agent_2_tool_calls(mini_logs: Path) -> None:
    fmt, (ok,) = parse_file(mini_logs / "ok.traj.json")
    assert fmt == "mini-swe-agent" and ok.attributes["format"] == "mini-swe-agent 2.x"
    assert ok.status == "ok" and ok.answer == "hello\n" and ok.cost_usd == 2.0
    assert [(s.step, s.call_index, s.tool, s.args, s.error_type) for s in ok.steps] == [
        (1, 0, "echo", {"command": "echo hello"}, None),
        (1, 1, "nosuchcmd", {"command": "nosuchcmd"}, "tool_not_found"),
        (2, 0, "echo", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\necho hello"}, None),
    ]
    assert "hello" in (ok.steps[0].observation or "") and "nosuchcmd" in (ok.steps[1].observation or "")
    assert ok.started_at is not None and ok.ended_at is not None

    _, (limit,) = parse_file(mini_logs / "limit.traj.json")
    assert limit.status == "max_iters" and [s.tool for s in limit.steps] == ["ls"] * 3

    _, (fmt_run,) = parse_file(mini_logs / "format.traj.json")
    assert [(s.tool, s.error_type) for s in fmt_run.steps] == [
        (None, "unparseable"), ("python", "tool_not_found"), ("echo", None)]


def test_mini_swe_agent_cost_of_0_after_model_calls_is_unknown(mini_logs: Path) -> None:
    """mini-swe-agent raises on a call it cannot price unless told to ignore it, and then counts 0.0: a
    run that called its model for $0 has an unknown cost (NULL), not a free one; the 0 is kept."""
    _, (run,) = parse_file(mini_logs / "unpriced.traj.json")
    assert run.status == "ok" and run.attributes["api_calls"] == 1
    assert run.cost_usd is None and run.attributes["instance_cost"] == 0.0


# -- OpenHands (hand-written, modelled on the serialized events of OpenHands 0.x) -------------------------


def oh_action(i: int, action: str, args: dict[str, Any], function: str | None = None, response: str | None = None,
              source: str = "agent") -> dict[str, Any]:
    event: dict[str, Any] = {"id": i, "timestamp": f"2025-03-01T10:00:{i:02d}.000000", "source": source,
                             "message": "", "action": action, "args": args}
    if function:
        event["tool_call_metadata"] = {
            "function_name": function, "tool_call_id": f"toolu_{i}", "total_calls_in_response": 1,
            "model_response": {"id": response or f"chatcmpl-{i}", "model": "claude-3-5-sonnet",
                               "usage": {"prompt_tokens": 100 * i, "completion_tokens": 10}}}
    return event


def oh_observation(i: int, cause: int, observation: str, content: str, extras: dict[str, Any]) -> dict[str, Any]:
    return {"id": i, "timestamp": f"2025-03-01T10:00:{i:02d}.500000", "source": "agent", "message": "",
            "observation": observation, "content": content, "extras": extras, "cause": cause}


def oh_state(i: int, state: str, reason: str = "") -> dict[str, Any]:
    return oh_observation(i, i, "agent_state_changed", "", {"agent_state": state, "reason": reason})


def oh_events(end: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        oh_action(0, "message", {"content": "Fix the failing test.\nIt is in tests/.", "image_urls": []},
                  source="user"),
        oh_state(1, "running"),
        oh_action(2, "run", {"command": "pytest -q", "thought": "Run the tests.", "blocking": False},
                  "execute_bash"),
        oh_observation(3, 2, "run", "1 failed", {"command": "pytest -q", "metadata": {"exit_code": 1}}),
        oh_action(4, "read", {"path": "/w/a.py", "thought": ""}, "str_replace_editor", response="r4"),
        oh_action(5, "read", {"path": "/w/b.py", "thought": ""}, "str_replace_editor", response="r4"),
        oh_observation(6, 4, "read", "a = 1", {"path": "/w/a.py"}),
        oh_observation(7, 5, "error", "File not found: /w/b.py", {}),
        *end,
    ]


@pytest.mark.parametrize(("end", "status"), [
    ([oh_action(8, "finish", {"final_thought": "Fixed."}, "finish"), oh_state(9, "finished")], "ok"),
    ([oh_state(8, "error", "RuntimeError: Agent reached maximum iteration in headless mode. Current "
                           "iteration: 30, max iteration: 30")], "max_iters"),
    ([oh_state(8, "error", "Agent reached maximum budget for conversation. Current budget: 2.01, max budget: "
                           "2.00")], "budget_exceeded"),
    ([oh_state(8, "error", "AgentStuckInLoopError: Agent got stuck in a loop")], "stagnated"),
    ([oh_observation(8, 8, "error", "litellm.APIError: boom", {}), oh_state(9, "error")], "error"),
    ([], "incomplete"),
])
def test_openhands_event_stream(tmp_path: Path, end: list[dict[str, Any]], status: str) -> None:
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(oh_events(end)))
    fmt, (run,) = parse_file(path)
    assert fmt == "openhands" and run.status == status
    assert run.task == "Fix the failing test.\nIt is in tests/."
    got = [(s.step, s.call_index, s.tool, s.args, s.observation, s.error_type) for s in run.steps]
    assert got[:3] == [
        (1, 0, "execute_bash", {"command": "pytest -q", "blocking": False}, "1 failed", "command_error"),
        (2, 0, "str_replace_editor", {"path": "/w/a.py"}, "a = 1", None),
        (2, 1, "str_replace_editor", {"path": "/w/b.py"}, "File not found: /w/b.py", "tool_error"),
    ]
    assert run.steps[0].thought == "Run the tests." and run.steps[0].input_tokens == 200
    assert (status == "ok") == (got[3:] == [(3, 0, "finish", {"final_thought": "Fixed."}, None, None)])


def test_openhands_evaluation_output_jsonl(tmp_path: Path) -> None:
    lines = [{"instance_id": f"repo__{n}", "instruction": f"Issue {n}", "history": oh_events([]),
              "metadata": {"llm_config": {"model": "anthropic/claude-3-5-sonnet"}},
              "metrics": {"accumulated_cost": 0.5}, "error": err}
             for n, err in ((1, None), (2, "Agent got stuck in a loop"))]
    path = tmp_path / "output.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    fmt, runs = parse_file(path)
    assert fmt == "openhands" and [t.status for t in runs] == ["incomplete", "stagnated"]
    assert [t.attributes["instance_id"] for t in runs] == ["repo__1", "repo__2"]
    assert runs[0].model == "anthropic/claude-3-5-sonnet" and runs[0].cost_usd == 0.5 and runs[0].task == "Issue 1"


def test_openhands_action_observation_pairs(tmp_path: Path) -> None:
    """The older history layout: a list of ``[action, observation]`` pairs."""
    events = oh_events([])
    pairs = [[events[2], events[3]], [events[4], events[6]], [events[5], events[7]]]
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"instance_id": "x", "history": pairs}))
    fmt, (run,) = parse_file(path)
    assert fmt == "openhands" and [(s.tool, s.observation) for s in run.steps] == [
        ("execute_bash", "1 failed"), ("str_replace_editor", "a = 1"), ("str_replace_editor", "File not found: /w/b.py")]


# -- bare message lists --------------------------------------------------------------------------------


MESSAGES = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "What is in /tmp?\nList it."},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "/tmp"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"},
    {"role": "assistant", "content": "Two files."},
]


def test_bare_message_list_json_jsonl_and_python_literal(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text(json.dumps(MESSAGES))
    (tmp_path / "many.jsonl").write_text("\n".join(json.dumps(MESSAGES[:n]) for n in (4, 5)) + "\n")
    (tmp_path / "repr.json").write_text(repr(MESSAGES))
    for name, n_runs in (("one.json", 1), ("many.jsonl", 2), ("repr.json", 1)):
        fmt, runs = parse_file(tmp_path / name)
        assert fmt == "openai-chat" and len(runs) == n_runs, name
        run = runs[-1]
        assert run.task == "What is in /tmp?\nList it." and run.status == "ok"
        assert calls(run) == [(1, "ls", {"path": "/tmp"}, "a.txt\nb.txt", None)], name
        assert (run.started_at, run.ended_at, run.input_tokens, run.cost_usd) == (None, None, None, None)
    # Python's repr is read as a literal, never evaluated
    (tmp_path / "evil.json").write_text("[__import__('os').system('touch pwned')]")
    with pytest.raises(TrajectoryFormatError, match="invalid JSON"):
        parse_file(tmp_path / "evil.json")
    assert not (tmp_path / "pwned").exists() and not (ROOT / "pwned").exists()


def test_files_without_times_or_usage_store_null(tmp_path: Path, db: Path) -> None:
    (tmp_path / "one.json").write_text(json.dumps(MESSAGES))
    import_paths(Store(db), [tmp_path])
    assert query(db, "SELECT status, started_at, ended_at FROM runs") == [("ok", None, None)]
    assert query(db, "SELECT started_at, input_tokens, output_tokens, cost_usd FROM run_records") == [
        (None, None, None, None)]
    assert query(db, "SELECT observation FROM tool_calls") == [("a.txt\nb.txt",)]


# -- Claude Code (hand-written, modelled on ~/.claude/projects/<project>/<session>.jsonl) ---------------


def cc(kind: str, n: int, content: Any, *, message_id: str | None = None, sidechain: bool = False,
       stop: str | None = None, usage: dict[str, int] | None = None, **extra: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message.update({"id": message_id, "model": "claude-sonnet-4-5", "type": "message", "stop_reason": stop,
                        "usage": usage or {"input_tokens": 10, "cache_read_input_tokens": 1000,
                                           "cache_creation_input_tokens": 5, "output_tokens": 20}})
    return {"parentUuid": None, "isSidechain": sidechain, "userType": "external", "cwd": "/w",
            "sessionId": "3f2a", "version": "1.0.80", "gitBranch": "main", "type": kind, "message": message,
            "uuid": f"u{n}", "timestamp": f"2025-08-01T12:00:{n:02d}.000Z", **extra}


CLAUDE_SESSION = [
    {"type": "summary", "summary": "Fix tests", "leafUuid": "u9"},
    {"type": "queue-operation", "operation": "enqueue", "sessionId": "3f2a"},  # a type of a newer version
    cc("user", 1, "Make the tests pass.\nThey are in tests/."),
    cc("assistant", 2, [{"type": "text", "text": "Let me run them."}], message_id="m1"),
    cc("assistant", 3, [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}}],
       message_id="m1", stop="tool_use"),
    cc("user", 4, [{"type": "tool_result", "tool_use_id": "t1", "content": "1 failed", "is_error": True}]),
    cc("assistant", 5, [{"type": "tool_use", "id": "t2", "name": "Task",
                         "input": {"prompt": "Find the bug"}}], message_id="m2", stop="tool_use"),
    cc("user", 6, "Find the bug", sidechain=True, agentId="a1"),
    cc("assistant", 7, [{"type": "tool_use", "id": "t3", "name": "Read", "input": {"file_path": "/w/a.py"}}],
       message_id="s1", sidechain=True, stop="tool_use", agentId="a1"),
    cc("user", 8, [{"type": "tool_result", "tool_use_id": "t3", "content": [{"type": "text", "text": "a = 1"}]}],
       sidechain=True, agentId="a1"),
    cc("assistant", 9, [{"type": "text", "text": "a should be 2."}], message_id="s2", sidechain=True,
       stop="end_turn", agentId="a1"),
    cc("user", 10, [{"type": "tool_result", "tool_use_id": "t2", "content": "a should be 2."}]),
    cc("assistant", 11, [{"type": "text", "text": "Fixed."}], message_id="m3", stop="end_turn"),
]


def test_claude_code_session_with_a_subagent(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "projects" / "-w" / "3f2a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(e) for e in CLAUDE_SESSION) + "\n")
    fmt, (main, sub) = parse_file(path)
    assert fmt == "claude-code" and main.status == "ok" and main.model == "claude-sonnet-4-5"
    assert main.task == "Make the tests pass.\nThey are in tests/."
    assert [(s.step, s.tool, s.args, s.observation, s.error_type) for s in main.steps] == [
        (1, "Bash", {"command": "pytest"}, "1 failed", "tool_error"),
        (2, "Task", {"prompt": "Find the bug"}, "a should be 2.", None),
        (3, None, None, None, None),
    ]
    assert main.steps[0].thought == "Let me run them." and main.steps[0].context_tokens == 1015
    assert len(main.llm_calls) == 3 and main.llm_calls[0].cache_read_tokens == 1000
    assert sub.parent_run_id == main.run_id and sub.task == "Find the bug" and sub.status == "ok"
    assert [(s.tool, s.observation) for s in sub.steps] == [("Read", "a = 1"), (None, None)]
    assert str(main.started_at) == "2025-08-01 12:00:01" and str(main.ended_at) == "2025-08-01 12:00:11"
    import_paths(Store(db), [path])
    assert query(db, "SELECT count(*), count(parent_run_id) FROM runs") == [(2, 1)]



def test_claude_code_tokens_count_the_cache_and_are_priced(tmp_path: Path, db: Path) -> None:
    """Anthropic reports cache reads and writes beside input_tokens; the store counts them in, as a traced
    call does, and a priced model's calls have a cost (they had 10 input tokens and no cost: a session
    that reads mostly from its cache showed 1% of its prompt)."""
    path = tmp_path / "projects" / "-w" / "3f2a.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(e) for e in CLAUDE_SESSION) + "\n")
    import_paths(Store(db), [path])
    one = (10 * 3.0 + 20 * 15.0 + 5 * 3.75 + 1000 * 0.30) / 1e6  # claude-sonnet-4-5 list prices
    calls = query(db, "SELECT input_tokens, cache_read_tokens, cache_creation_tokens, output_tokens, cost_usd "
                      "FROM llm_calls ORDER BY run_id, step")
    assert [c[:4] for c in calls] == [(1015, 1000, 5, 20)] * 5
    assert all(c[4] == pytest.approx(one) for c in calls), calls
    [(tokens, cost)] = query(db, "SELECT input_tokens, cost_usd FROM runs WHERE parent_run_id IS NULL")
    assert tokens == 3 * 1015 and cost == pytest.approx(3 * one)
    unpriced = [{**e, "message": {**e["message"], "model": "my-own-model"}} if e.get("type") == "assistant" else e
                for e in CLAUDE_SESSION]
    (tmp_path / "u.jsonl").write_text("\n".join(json.dumps(e) for e in unpriced) + "\n")
    import_paths(Store(db), [tmp_path / "u.jsonl"])
    assert query(db, "SELECT count(*), count(cost_usd) FROM llm_calls WHERE model = 'my-own-model'") == [(5, 0)]

def test_claude_code_interrupted_and_api_error(tmp_path: Path) -> None:
    interrupted = CLAUDE_SESSION[:4] + [cc("user", 4, [{"type": "text", "text": "[Request interrupted by user]"}])]
    api_error = CLAUDE_SESSION[:2] + [cc("assistant", 2, [{"type": "text", "text": "API Error: 529 Overloaded"}],
                                         message_id="e", isApiErrorMessage=True)]
    for entries, status in ((interrupted, "interrupted"), (api_error, "error"), (CLAUDE_SESSION[:4], "incomplete")):
        path = tmp_path / f"{status}.jsonl"
        path.write_text("\n".join(json.dumps(e) for e in entries))
        assert [t.status for t in parse_file(path)[1]] == [status]


@pytest.mark.parametrize(("input_tokens", "total_tokens", "counted"), [
    (10, 10 + 20 + 1000 + 5, 1015),  # Inspect's documented count: the cache is on top of input_tokens
    (10, 0, 1015),  # ... also when no total was kept
    (1015, 1015 + 20, 1015),  # older Inspect's OpenAI provider: input_tokens already hold the cached tokens
])
def test_inspect_model_calls_count_the_cache_in_whatever_the_provider(
    input_tokens: int, total_tokens: int, counted: int,
) -> None:
    """Inspect's input_tokens leave the cache out (older versions passed OpenAI's count, cache inside, on);
    the store's include it either way, so the prompt size and the price agree with a traced call's. The
    usage is Inspect's own type, dumped."""
    from inspect_ai.model import ModelOutput, ModelUsage

    from looptrace.tracer.ingest.files.inspect_log import _model_event
    from looptrace.tracer.ingest.files.trajectory import ImportedLLMCall, ImportedStep

    output = ModelOutput.from_content("claude-sonnet-4-5", "Done.")
    output.usage = ModelUsage(input_tokens=input_tokens, output_tokens=20, total_tokens=total_tokens,
                              input_tokens_cache_read=1000, input_tokens_cache_write=5)
    steps: list[ImportedStep] = []
    made: list[ImportedLLMCall] = []
    _model_event({"event": "model", "model": "claude-sonnet-4-5", "output": output.model_dump(mode="json")},
                 1, steps, made, {})
    assert (made[0].input_tokens, made[0].cache_read_tokens, steps[0].context_tokens) == (counted, 1000, counted)


def test_a_session_log_cut_mid_line_imports_its_whole_lines_as_incomplete(tmp_path: Path) -> None:
    """Claude Code appends a line per content block: a session killed mid-write (or read while it writes)
    ends in a cut line, and was skipped whole. Its whole lines import; the session did not end there, while
    the subagent that ended before it keeps its end. A file of one run a line still refuses a cut line."""
    whole = "\n".join(json.dumps(e) for e in CLAUDE_SESSION) + "\n"
    path = tmp_path / "cut.jsonl"
    path.write_text(whole[:-30])
    fmt, (main, sub) = parse_file(path)
    assert fmt == "claude-code" and [s.step for s in main.steps] == [1, 2]  # the cut "Fixed." response is gone
    assert main.status == "incomplete" and "cut line" in (main.error or "") and main.attributes["cut_line"]
    assert sub.status == "ok" and sub.error is None
    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant",
                                                                                 "content": "hello"}]}) + "\n"
                    + '{"messages": [{"role": "us')
    with pytest.raises(TrajectoryFormatError, match="line 2: invalid JSON"):
        parse_file(runs)
