"""The manual API on a 20-line agent, and the hostile inputs an agent may hand the tracer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from looptrace.tracer import Tracing
from looptrace.tracer.records.requests import content_sha, rebuild_requests

from .conftest import query


def example_agent(db: Path) -> None:
    """The README's 20-line example: a tiny agent traced with the manual API."""
    files = {"notes.txt": "buy milk", "todo.txt": "ship looptrace"}
    with Tracing(db) as tracing, tracing.run("file-agent", task="What is in todo.txt?", model="claude-haiku-4-5") as run:
        with run.step("Let me list the files.") as step:
            with step.llm_call({"model": "claude-haiku-4-5", "max_tokens": 256, "messages": [
                    {"role": "user", "content": "What is in todo.txt?"}]}) as call:
                call.response({"role": "assistant", "stop_reason": "tool_use", "content": [],
                               "usage": {"input_tokens": 50, "output_tokens": 10}})
            with step.tool_call("ls", {}) as tool:
                tool.result(" ".join(files))
        with run.step("Now read it.") as step:
            with step.tool_call("read", {"path": "todo.txt"}) as tool:
                tool.result(files["todo.txt"])
        with run.step("That file does not exist; try cat.") as step:
            with step.tool_call("cat", {"path": "todo.txt"}) as tool:
                tool.error("tool_not_found", "unknown tool: cat")
        run.finish("ok", answer=files["todo.txt"])


def test_example_agent_produces_the_documented_rows(db: Path) -> None:
    example_agent(db)
    [run] = query(db, "SELECT agent, task, model, status, n_steps, input_tokens, output_tokens, answer, source, "
                      "ended_at IS NOT NULL, cost_usd FROM runs")
    assert run[:10] == ("file-agent", "What is in todo.txt?", "claude-haiku-4-5", "ok", 3, 50, 10,
                        "ship looptrace", "looptrace", True)
    assert run[10] == pytest.approx((50 * 1.0 + 10 * 5.0) / 1e6)
    steps = query(db, "SELECT step, thought, tool, args, observation, is_error, error_type FROM steps ORDER BY step")
    assert steps == [
        (1, "Let me list the files.", "ls", "{}", "notes.txt todo.txt", False, None),
        (2, "Now read it.", "read", '{"path":"todo.txt"}', "ship looptrace", False, None),
        (3, "That file does not exist; try cat.", "cat", '{"path":"todo.txt"}', "unknown tool: cat", True,
         "tool_not_found"),
    ]
    names = {r[0] for r in query(db, "SELECT name FROM spans")}
    assert names == {"invoke_agent file-agent", "looptrace.step", "chat claude-haiku-4-5", "execute_tool ls",
                     "execute_tool read", "execute_tool cat"}
    [(attrs,)] = query(db, "SELECT attributes FROM spans WHERE name = 'execute_tool cat'")
    attrs = json.loads(attrs)
    assert attrs["error.type"] == "tool_not_found" and attrs["gen_ai.tool.name"] == "cat"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    [(chat,)] = query(db, "SELECT attributes FROM spans WHERE name LIKE 'chat%'")
    chat = json.loads(chat)
    assert chat["gen_ai.usage.input_tokens"] == 50 and chat["gen_ai.provider.name"] == "anthropic"
    # The parent chain is run -> step -> chat/tool.
    assert query(db, """
        SELECT count(*) FROM spans c JOIN spans s ON c.parent_span_id = s.span_id
        WHERE c.name LIKE 'execute_tool%' AND s.name = 'looptrace.step'""") == [(3,)]


def test_cache_tokens_count_as_input(db: Path) -> None:
    with Tracing(db) as tracing, tracing.run("a", model="claude-sonnet-4-5") as run, run.step() as step:
        with step.llm_call({"model": "claude-sonnet-4-5", "messages": []}) as call:
            call.response({"content": [], "stop_reason": "end_turn", "usage": {
                "input_tokens": 10, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 100,
                "output_tokens": 5}})
    assert query(db, "SELECT input_tokens, cache_read_tokens, cache_creation_tokens FROM llm_calls") == [
        (1110, 1000, 100)]
    assert query(db, "SELECT context_tokens FROM steps") == [(1110,)]
    [(cost,)] = query(db, "SELECT cost_usd FROM runs")
    assert cost == pytest.approx((10 * 3 + 1000 * 0.3 + 100 * 3.75 + 5 * 15) / 1e6)


def test_hostile_values_are_stored_and_never_raise(db: Path) -> None:
    big = "x" * (10 * 1024 * 1024)
    weird_args = {"obj": object(), "set": {1}, "bytes": b"\xff\xfe", "nan": math.nan, 3: "int key"}
    with Tracing(db) as tracing, tracing.run("a", task="lone \udc80 surrogate") as run:
        with run.step("thought with \ud800 and bytes") as step:
            with step.tool_call("big", {}) as call:
                call.result(big)
            with step.tool_call("bad-utf8", weird_args) as call:
                call.result(b"caf\xe9 \xff")
    rows = dict((r[0], r[1:]) for r in query(db, "SELECT tool, observation_bytes, observation, args FROM steps"))
    assert rows["big"][0] == len(big)
    assert query(db, "SELECT length(observation) FROM steps WHERE tool = 'big'") == [(len(big),)]
    assert rows["bad-utf8"][1] == "caf\ufffd \ufffd"
    args = json.loads(rows["bad-utf8"][2])
    assert args["obj"].startswith("<object object") and args["set"] == [1] and args["nan"] == "nan"
    assert args["bytes"] == "\ufffd\ufffd" and args["3"] == "int key"
    assert query(db, "SELECT task FROM runs") == [("lone \ufffd surrogate",)]
    assert query(db, "SELECT thought FROM steps WHERE tool = 'big'") == [("thought with \ufffd and bytes",)]


def test_agent_exceptions_are_recorded_and_reraised(db: Path) -> None:
    with pytest.raises(ZeroDivisionError):
        with Tracing(db) as tracing, tracing.run("a") as run, run.step() as step:
            with step.tool_call("divide", {"by": 0}):
                1 / 0  # noqa: B018
    assert query(db, "SELECT status, error FROM runs") == [("error", "ZeroDivisionError: division by zero")]
    assert query(db, "SELECT is_error, error_type, observation FROM steps") == [
        (True, "ZeroDivisionError", "ZeroDivisionError: division by zero")]


@pytest.mark.parametrize("window", [None, 40], ids=["whole-history", "window-of-40"])
def test_a_long_run_stores_its_requests_linearly_and_rebuilds_them(db: Path, window: int | None) -> None:
    """Each message is stored once, whether the agent resends its whole history or a window of its
    last 40 messages (the oldest falling out: ``messages_drop``), and every request is rebuilt."""
    system = "You are a careful agent. " * 50
    tools = [{"name": "read", "description": "read a file " * 20, "input_schema": {"type": "object"}}]
    messages: list[dict[str, object]] = [{"role": "user", "content": "task " * 100}]
    shas, requests = [], []
    with Tracing(db) as tracing, tracing.run("long") as run:
        for i in range(200):
            request = {"model": "scripted", "max_tokens": 100, "system": system, "tools": tools,
                       "messages": list(messages[-window:] if window else messages)}
            shas.append(content_sha(request))
            requests.append(request)
            with run.step() as step, step.llm_call(request) as call:
                reply = {"role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"i": i}}]}
                call.response({**reply, "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}})
            messages += [reply, {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": "observation " * 30}]}]
    rows = query(db, """SELECT call_id, base_call_id, params, system_sha, system, tools_sha, tools,
                               messages_keep, messages_append, request_sha, messages_drop
                        FROM llm_call_records ORDER BY started_at""")
    stored = sum(len(r[8]) for r in rows) + sum(len(r[4] or "") + len(r[6] or "") for r in rows)
    whole = sum(len(json.dumps(r)) for r in requests)
    # Each message is stored once: about the size of the final request, not 200 growing copies.
    assert stored < 2 * len(json.dumps(messages)) + len(system) + 2000
    assert stored * (10 if window else 50) < whole
    assert sum(1 for r in rows if r[4] is not None) == 1 and sum(1 for r in rows if r[6] is not None) == 1
    rebuilt = rebuild_requests(
        {"call_id": r[0], "base_call_id": r[1], "params": json.loads(r[2]), "system_sha": r[3],
         "system": json.loads(r[4]) if r[4] else None, "tools_sha": r[5], "tools": json.loads(r[6]) if r[6] else None,
         "keep": r[7], "append": json.loads(r[8]), "drop": r[10]} for r in rows
    )
    assert [content_sha(rebuilt[r[0]]) for r in rows] == shas == [r[9] for r in rows]
    drops = [(r[10] or 0, r[7]) for r in rows]
    if window:  # past the window, each call drops the two oldest messages and keeps the other 38
        assert set(drops[21:]) == {(2, 38)} and drops[20] == (1, 38)
    else:
        assert drops[1:] == [(0, 2 * i - 1) for i in range(1, 200)]
