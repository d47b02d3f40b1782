"""Importing other agents' trajectories: each format, the shell heuristics, damaged files, the CLI.

Inputs are tiny files written into tmp_path; one slow test imports the shared corpus of real runs.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from looptrace.tracer.ingest.files.formats import TrajectoryFormatError, parse_file
from looptrace.tracer.ingest.files.minisweagent import mini_status
from looptrace.tracer.ingest.files.openai_chat import TAU_MAX_STEPS, parse_arguments, tau_status
from looptrace.tracer.ingest.files.shell import classify_command, command_not_found, looks_like_prose
from looptrace.tracer.ingest.files.sweagent import swe_agent_status
from looptrace.tracer.ingest.files.importing import ImportReport, import_paths
from looptrace.tracer.ingest.files.trajectory import Trajectory, estimate_tokens
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, SHARED, python_env

# -- inputs ---------------------------------------------------------------------------------------------


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw) if path.name.endswith(".gz") else raw)
    return path


def swe0(exit_status: str | None = "submitted") -> dict[str, Any]:
    """SWE-agent 0.x: a demo, the issue, then prose run as a command, a real command and the cap."""
    steps = [
        ("DISCUSSION\nLet's look around first.\n", "DISCUSSION\nLet's look around first.\n",
         "/bin/bash: line 1: DISCUSSION: command not found"),
        ("Find the file.\n", "find_file Foo.java\n", 'Found 1 matches for "Foo.java"'),
        ("Edit it.\n", "edit 3:4\n    return 1;\nend_of_edit\n", "[File: Foo.java (9 lines total)]"),
        ("", "exit_cost", "Exited (autosubmitted)"),
    ]
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "SETTING: you are a programmer."},
        {"role": "user", "content": "DEMONSTRATION of another issue", "is_demo": True},
        {"role": "user", "content": "ISSUE: Foo returns 0"},
    ]
    for thought, action, observation in steps:
        history.append({"role": "assistant", "content": thought + action, "thought": thought,
                        "action": action})
        history.append({"role": "user", "content": observation})
    return {
        "environment": "swe_main",
        "trajectory": [{"action": a, "observation": o, "response": t + a, "thought": t, "state": "{}"}
                       for t, a, o in steps],
        "history": history,
        "info": {"exit_status": exit_status, "submission": "diff --git a/Foo.java",
                 "model_stats": {"instance_cost": 1.5, "tokens_sent": 1000, "tokens_received": 100,
                                 "api_calls": 4}},
    }


def swe1(exit_status: str = "submitted (exit_context)") -> dict[str, Any]:
    """SWE-agent 1.x: each step carries its whole prompt under ``messages`` (or ``query``)."""
    system = {"role": "system", "content": "You are a helpful assistant."}
    task = {"role": "user", "content": [{"type": "text",
                                         "text": "<pr_description>\nFix the parser\n</pr_description>\nGo."}]}
    first = [system, task]
    second = [*first, {"role": "assistant", "content": "Look.", "tool_calls": [
        {"id": "t1", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
        {"role": "tool", "content": [{"type": "text", "text": "a.py b.py"}]}]
    return {
        "environment": "main",
        "replay_config": json.dumps({"agent": {"model": {"name": "claude-sonnet-4", "api_base": None}}}),
        "trajectory": [
            {"action": "ls", "observation": "a.py b.py", "response": "Look.", "thought": "Look.",
             "messages": first, "execution_time": 0.1, "state": {}, "extra_info": {}},
            {"action": "python -c 'import a'", "observation": "Traceback (most recent call last):",
             "response": "Run.", "thought": "Run.", "query": second, "execution_time": 0.2, "state": {},
             "extra_info": {}},
            {"action": "", "observation": "Exited (autosubmitted)", "response": "Exit due to context window",
             "thought": "Exit due to context window", "messages": second},
        ],
        "history": [system, task],
        "info": {"exit_status": exit_status, "swe_agent_version": "1.1.0",
                 "model_stats": {"instance_cost": 0.5, "tokens_sent": 500, "tokens_received": 50,
                                 "api_calls": 3}},
    }


def mini(exit_status: str = "Submitted") -> dict[str, Any]:
    def said(text: str, prompt: int | None = None) -> dict[str, Any]:
        m: dict[str, Any] = {"role": "assistant", "content": text}
        if prompt is not None:
            m["extra"] = {"response": {"created": 1_700_000_000 + prompt,
                                       "usage": {"prompt_tokens": prompt, "completion_tokens": 7}}}
        return m

    return {
        "trajectory_format": "mini-swe-agent-1",
        "instance_id": "x__y-1",
        "messages": [
            {"role": "system", "content": "Reply with one bash block."},
            {"role": "user", "content": "<pr_description>\nConsider the following PR description:\nFix y\n"
                                        "</pr_description>"},
            said("THOUGHT: two at once\n```bash\nls\n```\n```bash\npwd\n```", 100),
            {"role": "user",
             "content": "Please always provide EXACTLY ONE action in triple backticks, found 2 actions."},
            said("THOUGHT: list\n```bash\nls nope\n```", 150),
            {"role": "user",
             "content": "<returncode>2</returncode>\n<output>\nls: cannot access 'nope'\n</output>"},
            said("THOUGHT: test\n```bash\npytest -q\n```"),
            {"role": "user",
             "content": "<returncode>127</returncode>\n<output>\nbash: line 1: pytest: command not found\n"
                        "</output>"},
            said("THOUGHT: done\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```", 300),
            {"role": "user", "content": "diff --git a/y.py b/y.py"},
        ],
        "info": {"exit_status": exit_status, "submission": "diff --git a/y.py b/y.py",
                 "model_stats": {"instance_cost": 0.25, "api_calls": 4},
                 "config": {"model": {"model_name": "gemini-3-pro"}}},
    }


def call(id: str | None, name: str, arguments: str) -> dict[str, Any]:
    c: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if id is not None:
        c["id"] = id
    return c


def tau(n_replies: int = 0, *, last: str = "Thanks!###STOP###", source: str = "user") -> dict[str, Any]:
    """A tau-bench episode: one step with two calls (answered out of order), a bad-JSON call, then replies."""
    traj: list[dict[str, Any]] = [
        {"role": "system", "content": "# Airline policy"},
        {"role": "user", "content": "Change my flight."},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            call("c1", "get_user_details", '{"user_id": "mia"}'),
            call("c2", "get_reservation_details", '{"id": 1}')]},
        {"role": "tool", "tool_call_id": "c2", "name": "get_reservation_details",
         "content": '{"flights": []}'},
        {"role": "tool", "tool_call_id": "c1", "name": "get_user_details", "content": '{"name": "Mia"}'},
        {"role": "assistant", "content": None,
         "tool_calls": [call("c3", "book_reservation", '{"user_id": "mia",')]},
        {"role": "tool", "tool_call_id": "c3", "name": "book_reservation", "content": "Error: bad arguments"},
        {"role": "assistant", "content": "Done, anything else?"},
    ]
    for i in range(n_replies):
        traj += [{"role": "user", "content": f"and {i}?"}, {"role": "assistant", "content": f"reply {i}"}]
    traj.append({"role": "user", "content": last})
    return {"task_id": 7, "trial": 0, "reward": 0.0, "traj": traj,
            "info": {"source": source, "task": {"instruction": "You are Mia."}, "reward_info": {}}}


def rows(db: Path, *sqls: str) -> list[list[tuple[Any, ...]]]:
    """The rows of each query, in one reader session (each session costs a store open)."""
    with Store(db).reader(locked_down=False) as conn:
        return [conn.execute(sql).fetchall() for sql in sqls]


def one(path: Path) -> Trajectory:
    _, runs = parse_file(path)
    assert len(runs) == 1
    return runs[0]


def calls(t: Trajectory) -> list[tuple[int, int, str | None, str | None]]:
    return [(s.step, s.call_index, s.tool, s.error_type) for s in t.steps]


# -- status translation -----------------------------------------------------------------------------


@pytest.mark.parametrize(("exit_status", "status"), [
    ("submitted", "ok"),
    ("submitted (exit_cost)", "budget_exceeded"),
    ("exit_cost", "budget_exceeded"),
    ("exit_context", "context_overflow"),
    ("submitted (exit_context)", "context_overflow"),
    ("exit_format", "error"),
    ("exit_command_timeout", "error"),
    ("submitted (exit_command_timeout)", "error"),
    ("early_exit", "error"),
    ("exit_api", "error"),
    (None, "incomplete"),
])
def test_swe_agent_status(exit_status: str | None, status: str) -> None:
    got, error = swe_agent_status(exit_status)
    assert got == status
    assert (error is None) == (status in ("ok", "incomplete"))
    if exit_status == "exit_format":
        assert error and "could not be parsed" in error


@pytest.mark.parametrize(("exit_status", "status"), [
    ("Submitted", "ok"), ("LimitsExceeded", "max_iters"), ("FormatError", "error"), ("TimeoutError", "error"),
    (None, "incomplete"),
])
def test_mini_swe_agent_status(exit_status: str | None, status: str) -> None:
    assert mini_status(exit_status)[0] == status


@pytest.mark.parametrize(("n_assistant", "last", "source", "status"), [
    (TAU_MAX_STEPS, "ok then", "user", "max_iters"),          # the cap cut it off
    (TAU_MAX_STEPS, "bye ###STOP###", "user", "ok"),           # the user ended it at the last moment
    (TAU_MAX_STEPS, None, "transfer_to_human_agents", "ok"),   # handed over to a human
    (TAU_MAX_STEPS - 1, "ok then", "user", "ok"),
])
def test_tau_bench_status(n_assistant: int, last: str | None, source: str, status: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "assistant", "content": "hi"}] * n_assistant
    if last is not None:
        messages.append({"role": "user", "content": last})
    assert tau_status(messages, source)[0] == status


# -- shell-command agents -------------------------------------------------------------------------------


@pytest.mark.parametrize(("action", "observation", "tool", "error_type"), [
    ("find . -name x", "./x", "find", None),
    ("foo --bar", "bash: foo: command not found", "foo", "tool_not_found"),
    ("javac Foo.java", "/bin/bash: line 5: javac: command not found", "javac", "tool_not_found"),
    ("DISCUSSION\nLet us look.", "/bin/bash: line 1: DISCUSSION: command not found", "DISCUSSION",
     "tool_not_found"),
    ("I'll check it", "/bin/bash: line 3: Ill: command not found", "I'll", "tool_not_found"),
    ("DISCUSSION\nFirst, let's see", "/bin/bash: line 2: unexpected EOF while looking for matching `''",
     "DISCUSSION", "tool_not_found"),
    ("[File: a.py (3 lines)]", "/bin/bash: line 1: syntax error near unexpected token `('", "[File:",
     "tool_not_found"),
    ("edit 3:4\n    x = 1\nend_of_edit", "[File: a.py (9 lines total)]", "edit", None),
    ("", "", None, "unparseable"),
    ("   \n", "Exited", None, "unparseable"),
    # near misses
    ("grep -rn needle .", "", "grep", None),                                    # found nothing
    ("grep -rn 'command not found' .", "run.sh: echo command not found", "grep", None),
    ("rm build.log", "bash: pp: command not found", "rm", None),                # another word was missing
    ("python t.py", "Traceback (most recent call last):\nValueError", "python", None),
    ("Now run it", "ran fine", "Now", None),                                   # prose-like but it worked
    ("# just a comment", "", "#", None),
    # explicit return codes (mini-swe-agent)
    ("ls nope", "<returncode>2</returncode>\n<output>ls: cannot access</output>", "ls", "command_error"),
    ("ls", "<returncode>0</returncode>\n<output>a</output>", "ls", None),
    ("pytest", "<returncode>127</returncode>\n<output>bash: line 1: pytest: command not found</output>",
     "pytest", "tool_not_found"),
])
def test_classify_command(action: str, observation: str, tool: str | None, error_type: str | None) -> None:
    got = classify_command(action, observation)
    assert (got.tool, got.error_type, got.is_error) == (tool, error_type, error_type is not None)
    if tool is not None:
        assert got.args == {"command": action}


@pytest.mark.parametrize(("word", "prose"), [
    ("DISCUSSION", True), ("THOUGHT:", True), ("Let's", True), ("I", True), ("Here's", True), ("```", True),
    ("[File:", True), ("ls", False), ("python", False), ("JAVA_HOME=/x", False), ("R", False),
    ("Rscript", False), ("EOF", False), ("./run.sh", False),
])
def test_looks_like_prose(word: str, prose: bool) -> None:
    assert looks_like_prose(word) is prose


def test_command_not_found_wordings() -> None:
    assert command_not_found("zsh: command not found: foo", "foo")
    assert command_not_found("sh: 1: foo: not found", "foo")
    assert not command_not_found("bash: foobar: command not found", "foo")
    assert not command_not_found(None, "foo")


# -- each format --------------------------------------------------------------------------------------


def test_swe_agent_0x(tmp_path: Path) -> None:
    t = one(write(tmp_path / "gpt-4o" / "apache__x-1.traj", swe0("submitted (exit_cost)")))
    assert (t.agent, t.model, t.status) == ("swe-agent", "gpt-4o", "budget_exceeded")
    assert t.attributes["exit_status"] == "submitted (exit_cost)"
    assert (t.input_tokens, t.output_tokens, t.cost_usd) == (1000, 100, 1.5)
    assert t.task == "ISSUE: Foo returns 0"  # the demonstration is not the task
    assert t.answer == "diff --git a/Foo.java"
    # the harness's closing exit_cost is not a tool call
    assert calls(t) == [(1, 0, "DISCUSSION", "tool_not_found"), (2, 0, "find_file", None),
                        (3, 0, "edit", None), (4, 0, None, None)]
    assert t.steps[2].args == {"command": "edit 3:4\n    return 1;\nend_of_edit\n"}
    # context: everything in history before each assistant turn (system, demo, issue, earlier turns)
    before_first = len("SETTING: you are a programmer.") + len("DEMONSTRATION of another issue") + len(
        "ISSUE: Foo returns 0")
    assert t.steps[0].context_tokens == estimate_tokens(before_first)
    sizes = [s.context_tokens or 0 for s in t.steps]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


def test_swe_agent_detected_by_structure_and_history_cut_short(tmp_path: Path) -> None:
    data = swe0()
    data["history"] = data["history"][:3]  # no assistant turns: the context is rebuilt from the steps
    fmt, (t,) = parse_file(write(tmp_path / "run.json", data))
    opening = sum(len(m["content"]) for m in data["history"])
    first = data["trajectory"][0]
    after_first = opening + len(first["response"]) + len(first["observation"])
    assert fmt == "swe-agent"
    assert [s.context_tokens for s in t.steps][:2] == [estimate_tokens(opening), estimate_tokens(after_first)]


def test_swe_agent_1x_gzip_measures_each_prompt(tmp_path: Path) -> None:
    t = one(write(tmp_path / "runs" / "django-1.traj.gz", swe1()))
    assert (t.model, t.status, t.cost_usd) == ("claude-sonnet-4", "context_overflow", 0.5)
    assert t.error and "context window" in t.error
    assert t.task == "Fix the parser"
    first_prompt = len("You are a helpful assistant.") + len(
        "<pr_description>\nFix the parser\n</pr_description>\nGo.")
    second_prompt = first_prompt + len("Look.") + len("bash") + len('{"command": "ls"}') + len("a.py b.py")
    assert [s.context_tokens for s in t.steps] == [
        estimate_tokens(first_prompt), estimate_tokens(second_prompt), estimate_tokens(second_prompt)]
    # a Traceback without a return code is not flagged; the closing step names no tool
    assert calls(t) == [(1, 0, "ls", None), (2, 0, "python", None), (3, 0, None, None)]


def test_swe_agent_1x_served_model_name_yields_to_the_folder(tmp_path: Path) -> None:
    data = swe1("submitted")
    data["replay_config"] = {"agent": {"model": {"name": "gpt-4o", "api_base": "https://example.invalid/v1"}}}
    t = one(write(tmp_path / "swe-agent-lm-32b" / "a.traj.gz", data))
    assert (t.model, t.status, t.attributes["configured_model"]) == ("swe-agent-lm-32b", "ok", "gpt-4o")


def test_mini_swe_agent(tmp_path: Path) -> None:
    t = one(write(tmp_path / "x__y-1.traj.json", mini()))
    assert (t.agent, t.model, t.status, t.cost_usd) == ("mini-swe-agent", "gemini-3-pro", "ok", 0.25)
    assert t.task == "Fix y"
    assert calls(t) == [(1, 0, None, "unparseable"), (2, 0, "ls", "command_error"),
                        (3, 0, "pytest", "tool_not_found"), (4, 0, "echo", None)]
    assert t.steps[0].observation and "EXACTLY ONE action" in t.steps[0].observation
    assert t.steps[1].thought == "THOUGHT: list"
    assert [(s.input_tokens, s.context_tokens) for s in t.steps][:2] == [(100, 100), (150, 150)]
    assert t.steps[2].input_tokens is None and t.steps[2].context_tokens  # estimated when usage is missing
    assert t.started_at is not None and t.ended_at is not None and t.started_at < t.ended_at
    assert one(write(tmp_path / "b.traj.json", mini("LimitsExceeded"))).status == "max_iters"


def test_mini_swe_agent_detected_by_structure(tmp_path: Path) -> None:
    data = mini()
    del data["trajectory_format"]
    fmt, _ = parse_file(write(tmp_path / "run.json", data))
    assert fmt == "mini-swe-agent"


def test_tau_bench_multi_call_steps_and_bad_arguments(tmp_path: Path) -> None:
    fmt, runs = parse_file(write(tmp_path / "task007_trial0.json", tau()))
    (t,) = runs
    assert (fmt, t.agent, t.status, t.task) == ("openai-chat", "tau-bench", "ok", "You are Mia.")
    assert t.attributes["source"] == "user" and t.attributes["reward"] == 0.0
    assert calls(t) == [(1, 0, "get_user_details", None), (1, 1, "get_reservation_details", None),
                        (2, 0, "book_reservation", "invalid_arguments"), (3, 0, None, None)]
    a, b, bad, reply = t.steps
    assert (a.tool_call_id, a.args, a.observation, a.thought) == ("c1", {"user_id": "mia"}, '{"name": "Mia"}',
                                                                  "Let me look.")
    assert (b.tool_call_id, b.observation, b.thought) == ("c2", '{"flights": []}', None)
    assert bad.args == '{"user_id": "mia",' and bad.is_error and bad.observation == "Error: bad arguments"
    assert reply.thought == "Done, anything else?" and reply.tool is None
    assert a.context_tokens == estimate_tokens(len("# Airline policy") + len("Change my flight."))
    assert b.context_tokens is None  # step-level figures sit on call 0


def test_tau_bench_cap(tmp_path: Path) -> None:
    capped = one(write(tmp_path / "a.json", tau(TAU_MAX_STEPS - 3, last="and then?")))
    assert capped.status == "max_iters" and capped.error
    stopped = one(write(tmp_path / "b.json", tau(TAU_MAX_STEPS - 3)))
    assert stopped.status == "ok"


def test_tau_bench_results_list_is_one_run_per_episode(tmp_path: Path) -> None:
    episodes = [tau(), {**tau(), "trial": 1}]
    runs = parse_file(write(tmp_path / "results.json", episodes))[1]
    assert [t.key for t in runs] == ["7/0", "7/1"] and len({t.run_id for t in runs}) == 2


def test_openai_chat_declared_tools_and_unmatched_ids(tmp_path: Path) -> None:
    data = {
        "model": "gpt-4o-mini",
        "tools": [{"type": "function", "function": {"name": "search"}}],
        "messages": [
            {"role": "user", "content": "Find cats."},
            {"role": "assistant", "content": "", "tool_calls": [call(None, "search", '{"q": "cats"}'),
                                                                call(None, "browse", '{"url": "x"}')]},
            {"role": "tool", "name": "browse", "content": "page"},
            {"role": "tool", "name": "search", "content": "3 cats"},
            {"role": "assistant", "content": "Three cats."},
        ],
    }
    t = one(write(tmp_path / "chat.json", data))
    assert (t.agent, t.model, t.status) == ("openai-chat", "gpt-4o-mini", "ok")
    assert calls(t) == [(1, 0, "search", None), (1, 1, "browse", "tool_not_found"), (2, 0, None, None)]
    assert [s.observation for s in t.steps[:2]] == ["3 cats", "page"]  # matched by name


def test_parse_arguments() -> None:
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("{'a': 1}") == ("{'a': 1}", "invalid_arguments")
    assert parse_arguments({"a": 1}) == ({"a": 1}, None)


@pytest.mark.parametrize(("data", "agent", "n_steps"), [
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}], "chat", 1),
    ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "plan a trip"},
                   {"role": "user", "name": "planner", "content": "step 1"},
                   {"role": "assistant", "name": "planner", "content": "step 2"},
                   {"role": "user", "name": "critic", "content": "too long"}], "status": "stagnated"},
     "planner", 3),
    ({"history": [{"role": "user", "content": "q"},
                  {"role": "assistant", "content": [{"type": "text", "text": "a"}]}]}, "chat", 1),
])
def test_generic_chat(tmp_path: Path, data: Any, agent: str, n_steps: int) -> None:
    fmt, (t,) = parse_file(write(tmp_path / "log.json", data))
    assert (fmt, t.agent, len(t.steps)) == ("chat", agent, n_steps)
    assert all(s.tool is None and s.thought for s in t.steps)
    assert t.status == (data.get("status", "ok") if isinstance(data, dict) else "ok")
    assert t.task in ("hi", "plan a trip", "q")


# -- "ok only when an agent had the last word", and never for that alone in a group chat ------------------

_ASK = {"role": "user", "content": "Plan a trip to Lisbon."}


def _turn(name: str | None, text: str, role: str = "assistant") -> dict[str, Any]:
    return {"role": role, "content": text, **({"name": name} if name else {})}


@pytest.mark.parametrize(("name", "messages", "status", "answer"), [
    ("one agent had the last word", [_ASK, _turn(None, "Day 1: Belem.")], "ok", "Day 1: Belem."),
    ("a person spoke last", [_ASK, _turn(None, "Which dates?"), _ASK], "incomplete", None),
    ("nobody answered", [_ASK, {"role": "system", "content": "be brief"}], None, None),  # skipped: no agent turn
    ("a group chat stops on an agent's message without an end",
     [_ASK, _turn("planner", "Day 1: Belem."), _turn("critic", "Add Sintra.", role="user")], "incomplete",
     "Add Sintra."),
    ("a group chat with a termination word is read by the analyzer, not here",
     [_ASK, _turn("planner", "Day 1: Belem."), _turn("critic", "Good. TERMINATE", role="user")], "incomplete",
     "Good. TERMINATE"),
])
def test_generic_chat_end(tmp_path: Path, name: str, messages: list[dict[str, Any]], status: str | None,
                          answer: str | None) -> None:
    path = write(tmp_path / "log.json", {"messages": messages})
    if status is None:
        with pytest.raises(TrajectoryFormatError, match="no agent turns"):
            parse_file(path)
        return
    _, (t,) = parse_file(path)
    assert (t.status, t.answer) == (status, answer), name
    assert t.attributes["messages"] == len(messages)


def test_generic_chat_keeps_a_recorded_round_limit(tmp_path: Path) -> None:
    data = {"messages": [_ASK, _turn("planner", "a"), _turn("critic", "b")], "max_round": 3, "max_turns": True}
    _, (t,) = parse_file(write(tmp_path / "log.json", data))
    assert t.attributes["max_round"] == 3 and "max_turns" not in t.attributes  # a flag is not a limit


_CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "search", "arguments": "{}"}}]}
_RESULT = {"role": "tool", "tool_call_id": "c1", "content": "3 hotels"}


@pytest.mark.parametrize(("name", "messages", "status", "answer"), [
    ("the assistant's reply is its answer", [_ASK, _turn(None, "Day 1: Belem.")], "ok", "Day 1: Belem."),
    ("its reply after a tool result is its answer", [_ASK, _CALL, _RESULT, _turn(None, "Hotel Tivoli.")], "ok",
     "Hotel Tivoli."),
    ("stops on a tool call", [_ASK, _CALL], "incomplete", None),
    ("stops on a tool result", [_ASK, _CALL, _RESULT], "incomplete", None),
    ("stops on the user's message", [_ASK, _turn(None, "Which dates?"), _ASK], "incomplete", None),
    ("two named assistants take turns: a group chat", [_ASK, _turn("planner", "Day 1."), _turn("critic", "Ok.")],
     "incomplete", "Ok."),
])
def test_openai_chat_end(tmp_path: Path, name: str, messages: list[dict[str, Any]], status: str,
                         answer: str | None) -> None:
    fmt, (t,) = parse_file(write(tmp_path / "chat.json", {"messages": messages, "model": "gpt-4o"}))
    assert (t.status, t.answer) == (status, answer), (name, fmt)


# -- damaged files and the runner -------------------------------------------------------------------------


def corrupt_files(folder: Path) -> dict[str, str]:
    """file name -> a word the skip reason must contain."""
    folder.mkdir(parents=True, exist_ok=True)
    good = gzip.compress(json.dumps(swe0()).encode())
    files: dict[str, tuple[bytes, str]] = {
        "truncated.json": (json.dumps(tau()).encode()[:-40], "invalid JSON"),
        "truncated.traj.gz": (good[: len(good) // 2], "gzip"),
        "not-gzip.traj.gz": (b'{"trajectory": []}', "gzip"),
        "number.traj": (json.dumps({"trajectory": 5}).encode(), "wrong structure"),
        "bad-step.traj": (json.dumps({"trajectory": [{"action": "ls"}, 7]}).encode(), "trajectory[1]"),
        "deep.json": (b"[" * 100_000 + b"]" * 100_000, "nested"),
        "junk.json": (json.dumps({"a": [[[{"b": [1, {"c": None}]}]]]}).encode(), "unknown format"),
        "latin1.json": ('[{"role": "user", "content": "caf\u00e9"}]'.encode("latin-1"), "UTF-8"),
        "empty.json": (b"", "empty"),
        "README.md": (b"# notes", "not a trajectory file"),
    }
    for name, (raw, _) in files.items():
        (folder / name).write_bytes(raw)
    return {name: word for name, (_, word) in files.items()}


def test_damaged_files_are_skipped_with_a_reason_and_never_half_imported(tmp_path: Path, db: Path) -> None:
    expected = corrupt_files(tmp_path / "in")
    write(tmp_path / "in" / "gpt-4o" / "ok.traj", swe0())
    seen: list[tuple[int, int]] = []
    report = import_paths(Store(db), [tmp_path / "in"],
                          progress=lambda done, total, _: seen.append((done, total)))
    assert (report.files_seen, report.runs_imported, report.runs_present) == (len(expected) + 1, 1, 0)
    assert report.steps_imported == 4 and report.by_format == {"swe-agent": 1}
    reasons = {Path(p).name: r for p, r in report.skipped}
    assert reasons.keys() == expected.keys()
    for name, word in expected.items():
        assert word in reasons[name], (name, reasons[name])
    assert seen[-1] == (len(expected) + 1, len(expected) + 1)
    source = str((tmp_path / "in" / "gpt-4o" / "ok.traj").resolve())
    assert rows(db, "SELECT count(*) FROM run_records",
                "SELECT count(*), count(DISTINCT run_id) FROM tool_call_records",
                "SELECT source FROM runs") == [[(1,)], [(3, 1)], [(source,)]]



def test_a_named_pipe_in_a_folder_is_skipped_not_read(tmp_path: Path, db: Path) -> None:
    """A folder walk opened every name it met: a named pipe blocked the import for ever on its first read.
    Run as a child with a deadline, so the old code fails instead of hanging the suite."""
    folder = tmp_path / "in"
    write(folder / "gpt-4o" / "ok.traj", swe0())
    os.mkfifo(folder / "feed.jsonl")
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "import", str(folder), "--db", str(db)],
                          capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"skipped {(folder / 'feed.jsonl').resolve()}: not a regular file" in done.stdout + done.stderr
    assert rows(db, "SELECT count(*) FROM runs") == [[(1,)]]

def test_a_file_that_cannot_be_stored_does_not_sink_its_batch(tmp_path: Path, db: Path) -> None:
    unstorable = mini()
    unstorable["messages"][2]["extra"]["response"]["usage"]["prompt_tokens"] = 10**30  # overflows BIGINT
    write(tmp_path / "a.traj.json", mini())
    write(tmp_path / "b.traj.json", unstorable)
    write(tmp_path / "c.traj.json", mini("LimitsExceeded"))
    report = import_paths(Store(db), [tmp_path])
    assert report.runs_imported == 2
    assert [(Path(p).name, "could not be stored" in r) for p, r in report.skipped] == [("b.traj.json", True)]
    assert rows(db, "SELECT count(*) FROM runs", "SELECT count(*) FROM steps") == [[(2,)], [(8,)]]


def test_importing_twice_adds_nothing(tmp_path: Path, db: Path) -> None:
    write(tmp_path / "m" / "one.traj", swe0())
    write(tmp_path / "m" / "two.traj.gz", swe1())
    write(tmp_path / "m" / "results.json", [tau(), {**tau(), "trial": 1}])
    first = import_paths(Store(db), [tmp_path / "m"])
    assert (first.runs_imported, first.runs_present, first.steps_imported) == (4, 0, 4 + 3 + 3 + 3)
    # a file named twice counts once
    again = import_paths(Store(db), [tmp_path / "m", tmp_path / "m" / "one.traj"])
    assert (again.files_seen, again.runs_imported, again.runs_present, again.steps_imported) == (3, 0, 4, 0)
    assert rows(db, "SELECT count(*) FROM run_records", "SELECT sum(n_steps) FROM runs") == [[(4,)], [(13,)]]


def test_missing_path_is_reported(tmp_path: Path, db: Path) -> None:
    report = import_paths(Store(db), [tmp_path / "nope"])
    assert report == ImportReport(skipped=[(str(tmp_path / "nope"), "no such file or folder")])
    assert not report.ok


def test_parse_file_raises_the_reason(tmp_path: Path) -> None:
    with pytest.raises(TrajectoryFormatError, match="unknown format"):
        parse_file(write(tmp_path / "x.json", {"hello": "world"}))


# -- the command ---------------------------------------------------------------------------------------


def looptrace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True,
                          env=python_env(), cwd=ROOT, timeout=120)


def test_cli_import_prints_the_summary(tmp_path: Path, db: Path) -> None:
    write(tmp_path / "in" / "gpt-4o" / "a.traj", swe0())
    write(tmp_path / "in" / "b.traj.json", mini())
    (tmp_path / "in" / "labels.csv").write_text("a,b\n")
    (tmp_path / "in" / "broken.json").write_text("{")
    done = looptrace("import", str(tmp_path / "in"), "--db", str(db))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"skipped {(tmp_path / 'in' / 'labels.csv').resolve()}: not a trajectory file" in lines
    assert any(line.startswith(f"skipped {(tmp_path / 'in' / 'broken.json').resolve()}: invalid JSON")
               for line in lines)
    assert "runs imported: 2" in lines and "runs already present: 0" in lines and "steps imported: 8" in lines
    again = looptrace("import", str(tmp_path / "in"), "--db", str(db))
    assert again.returncode == 0
    assert "runs imported: 0" in again.stdout and "runs already present: 2" in again.stdout
    nothing = looptrace("import", str(tmp_path / "in" / "broken.json"), "--db", str(db))
    assert nothing.returncode == 1 and "nothing could be imported" in nothing.stderr


# -- real runs ---------------------------------------------------------------------------------------


CORPUS = SHARED / "corpora"


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="shared corpus not present")
def test_corpus_imports_whole(db: Path) -> None:
    started = time.monotonic()
    report = import_paths(Store(db), [CORPUS])
    elapsed = time.monotonic() - started
    print(f"corpus: {report.runs_imported} runs, {report.steps_imported} steps in {elapsed:.1f}s")
    assert report.runs_imported == 543 and report.runs_present == 0
    assert {Path(p).name for p, _ in report.skipped} == {"README.md", "labels.csv"}
    assert report.by_format == {"swe-agent": 293, "openai-chat": 200, "mini-swe-agent": 50}
    ((n_runs, fewest_steps),), = rows(db, "SELECT count(*), min(n_steps) FROM runs")
    assert n_runs == 543 and fewest_steps >= 1
    again = import_paths(Store(db), [CORPUS])
    assert (again.runs_imported, again.runs_present, again.steps_imported) == (0, 543, 0)


def test_an_unterminated_string_is_said_once() -> None:
    """json's own words end in "at" ("Unterminated string starting at"): the reason read "at at line 1"."""
    from looptrace.tracer.ingest.files.detect import loads

    with pytest.raises(TrajectoryFormatError) as caught:
        loads('{"a": "b')
    assert str(caught.value) == "invalid JSON: Unterminated string starting at line 1 column 7"
