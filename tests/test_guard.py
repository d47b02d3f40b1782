"""Guards on an agent looptrace did not write: the real ``anthropic`` SDK over HTTP to the local Messages
API server, a bare tool loop that never stops by itself, and the store the guard's run lands in."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from looptrace.loop.server import MessagesServer, Reply
from looptrace.replay.analyzer import analyze_store
from looptrace.replay.recording import load_recording
from looptrace.replay.serve import RecordingHandler
from looptrace.tracer import Guard, GuardTripped, Tracing
from looptrace.tracer.guard import REFLECTION
from looptrace.tracer.spans.anthropic import AnthropicInstrumentor
from looptrace.tracer.store import Store

from .conftest import query

MODEL = "claude-haiku-4-5"  # $1 / $5 per million input / output tokens
TOOLS = [{"name": "read_file", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
FILES = {"notes.txt": "ship it"}


def read_forever(body: dict[str, Any]) -> Reply:
    """A model stuck on one missing file, unless it was told it is repeating itself."""
    last = body["messages"][-1]
    told = isinstance(last["content"], list) and any(
        b.get("type") == "text" and "[looptrace guard]" in b.get("text", "") for b in last["content"])
    if told:
        return Reply([{"type": "tool_use", "id": f"toolu_{len(body['messages'])}", "name": "read_file",
                       "input": {"path": "notes.txt"}}], stop_reason="tool_use")
    if body["messages"][-1]["role"] == "user" and "ship it" in json.dumps(last["content"]):
        return Reply([{"type": "text", "text": "notes.txt says: ship it"}])
    return Reply([{"type": "text", "text": "Let me read missing.txt."},
                  {"type": "tool_use", "id": f"toolu_{len(body['messages'])}", "name": "read_file",
                   "input": {"path": "missing.txt"}}], stop_reason="tool_use",
                 usage={"input_tokens": 1000, "output_tokens": 200})  # $0.002 a call


def agent(client: anthropic.Anthropic, task: str = "What do my notes say?", limit: int = 40) -> str:
    """A bare tool loop with no cap of its own (the limit only keeps a broken test from hanging)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for _ in range(limit):
        reply = client.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "is_error": c.input["path"] not in FILES,
             "content": FILES.get(c.input["path"], f"FileNotFoundError: {c.input['path']}")} for c in calls]})
    raise AssertionError("the agent was not stopped")


@pytest.fixture
def server() -> Iterator[MessagesServer]:
    with MessagesServer(read_forever) as s:
        yield s


def events_named(db: Path, name: str) -> list[dict[str, Any]]:
    """Step events called ``name``, each with its step."""
    rows = query(db, "SELECT DISTINCT step, CAST(events AS VARCHAR) FROM steps WHERE events IS NOT NULL")
    return [{**e, "step": step} for step, events in rows for e in json.loads(events) if e["name"] == name]


def guarded(db: Path, guard: Guard) -> tuple[Tracing, AnthropicInstrumentor]:
    tracing = Tracing(db)
    return tracing, AnthropicInstrumentor(tracing, agent="reader", guard=guard).instrument()


def client_for(server: MessagesServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=0)


def test_repeats_stop_the_loop_before_the_fourth_request(db: Path, server: MessagesServer) -> None:
    tracing, instrumentor = guarded(db, Guard(max_repeats=3))
    try:
        with pytest.raises(GuardTripped) as tripped:
            agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    finding = tripped.value.finding
    assert len(server.requests) == 3  # the fourth request was never sent
    assert (finding.rule, finding.status, finding.steps, finding.calls) == ("max_repeats", "stagnated", (1, 2, 3), 3)
    assert finding.spend_usd == pytest.approx(0.006)
    assert "the same call of 'read_file' 3 times in a row" in str(tripped.value)  # the rules layer's words
    assert (finding.evidence["kind"], finding.evidence["wasted_usd"]) == ("repeat", pytest.approx(0.006))
    [(run_id, status, error, n_steps, n_calls)] = query(db, "SELECT run_id, status, error, n_steps, n_llm_calls FROM runs")
    assert status == "stagnated" and run_id == finding.run_id and "max_repeats=3" in error
    # The refused request made no step and no model call: the stop is the run's, with its reason.
    assert (n_steps, n_calls) == (3, 3) and events_named(db, "guard") == []
    [events] = query(db, "SELECT CAST(events AS VARCHAR) FROM spans WHERE name LIKE 'invoke_agent%'")
    [event] = [e for e in json.loads(events[0]) if e["name"] == "guard"]
    assert (event["attributes"]["rule"], event["attributes"]["steps"]) == ("max_repeats", "1,2,3")


def test_a_run_the_guard_stopped_can_be_served(db: Path, server: MessagesServer) -> None:
    """``looptrace serve`` plays the stopped run: its three calls, in order, and the same agent under the
    same guard is stopped at the same point by the served responses."""
    tracing, instrumentor = guarded(db, Guard(max_repeats=3))
    try:
        with pytest.raises(GuardTripped):
            agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    [(run_id,)] = query(db, "SELECT run_id FROM runs")
    recording = load_recording(Store(db), run_id, need_config=False)
    assert len(recording.calls) == 3
    replayed = db.parent / "replayed.duckdb"
    tracing, instrumentor = guarded(replayed, Guard(max_repeats=3))
    handler = RecordingHandler(recording)
    try:
        with MessagesServer(handler) as served, pytest.raises(GuardTripped):
            agent(client_for(served))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert (handler.served, handler.drifts) == (3, [])
    assert query(replayed, "SELECT status, n_steps FROM runs") == [("stagnated", 3)]


def test_the_diagnosis_names_the_steps_the_guard_named(db: Path, server: MessagesServer) -> None:
    tracing, instrumentor = guarded(db, Guard(max_repeats=3))
    try:
        with pytest.raises(GuardTripped) as tripped:
            agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    [primary] = [d for r in analyze_store(Store(db)) for d in r.diagnoses if d.is_primary]
    assert (primary.label, primary.first_step, primary.last_step) == ("stagnation", 1, 3)
    finding = tripped.value.finding
    assert finding.steps == (1, 2, 3)
    # One rule, two evaluations: the same kind of streak, the same spend, and the run ended in it.
    assert (primary.evidence["kind"], primary.evidence["ends_run"]) == (finding.evidence["kind"], True)
    assert primary.evidence["cost_usd"] == pytest.approx(finding.evidence["wasted_usd"])
    assert "recovered" not in primary.explanation


def test_reflect_adds_one_turn_and_a_model_that_changes_course_finishes(db: Path, server: MessagesServer) -> None:
    tracing, instrumentor = guarded(db, Guard(max_repeats=3, action="reflect"))
    try:
        answer = agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert answer == "notes.txt says: ship it"
    fourth = server.requests[3]["body"]["messages"][-1]["content"]
    assert fourth[-1]["type"] == "text" and fourth[-1]["text"].startswith(REFLECTION[:18])
    assert "3 times" in fourth[-1]["text"]
    assert [b["type"] for b in server.requests[4]["body"]["messages"][-1]["content"]] == ["tool_result"]
    assert query(db, "SELECT status, n_steps FROM runs") == [("ok", 5)]
    [(llm_messages,)] = query(db, "SELECT count(*) FROM llm_calls")
    assert llm_messages == 5


def test_reflect_stops_when_the_repeats_come_back(db: Path) -> None:
    def stubborn(body: dict[str, Any]) -> Reply:
        return Reply([{"type": "tool_use", "id": f"t{len(body['messages'])}", "name": "read_file",
                       "input": {"path": "missing.txt"}}], stop_reason="tool_use")

    tracing, instrumentor = guarded(db, Guard(max_repeats=3, action="reflect"))
    try:
        with MessagesServer(stubborn) as server, pytest.raises(GuardTripped) as tripped:
            agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert len(server.requests) == 6 and tripped.value.finding.steps == (4, 5, 6)
    assert query(db, "SELECT status FROM runs") == [("stagnated",)]


def test_budget_stops_within_one_call_of_the_limit(db: Path, server: MessagesServer) -> None:
    limit = 0.008  # four calls of $0.002
    tracing, instrumentor = guarded(db, Guard(max_usd=limit))
    try:
        with pytest.raises(GuardTripped) as tripped:
            agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    finding = tripped.value.finding
    assert finding.rule == "max_usd" and finding.spend_usd <= limit + 0.002
    [(status, cost, calls)] = query(db, "SELECT status, cost_usd, n_llm_calls FROM runs")
    assert status == "budget_exceeded" and cost == pytest.approx(finding.spend_usd) and calls == len(server.requests)
    assert cost <= limit + 0.002


def test_max_calls_is_max_iters(db: Path, server: MessagesServer) -> None:
    tracing, instrumentor = guarded(db, Guard(max_calls=2))
    try:
        with pytest.raises(GuardTripped, match="max_calls=2"):
            agent(client_for(server))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert len(server.requests) == 2
    assert query(db, "SELECT status FROM runs") == [("max_iters",)]


def test_warn_records_and_never_changes_a_request(db: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def five_then_done(body: dict[str, Any]) -> Reply:
        if len(body["messages"]) >= 11:
            return Reply([{"type": "text", "text": "gave up"}])
        return read_forever(body)

    sent: dict[str, list[Any]] = {}
    for name, guard in (("plain", None), ("warned", Guard(max_repeats=3, max_calls=2, max_usd=0.001,
                                                          action="warn"))):
        tracing = Tracing(tmp_path / f"{name}.duckdb")
        instrumentor = AnthropicInstrumentor(tracing, guard=guard).instrument()
        try:
            with MessagesServer(five_then_done) as server, caplog.at_level(logging.WARNING, "looptrace.guard"):
                assert agent(client_for(server)) == "gave up"
        finally:
            instrumentor.uninstrument()
            tracing.shutdown()
        sent[name] = [r["body"] for r in server.requests]
    assert sent["warned"] == sent["plain"] and len(sent["plain"]) == 6
    warned = tmp_path / "warned.duckdb"
    assert query(warned, "SELECT status FROM runs") == [("ok",)]
    rules = [e["attributes"]["rule"] for e in events_named(warned, "guard")]
    assert sorted(rules) == ["max_calls", "max_repeats", "max_usd"]  # each finding once
    assert len([r for r in caplog.records if "looptrace guard" in r.getMessage()]) == 3


def test_a_model_with_no_price_is_reported_once_not_counted_free(db: Path, caplog: pytest.LogCaptureFixture) -> None:
    def unpriced(body: dict[str, Any]) -> Reply:
        return Reply([{"type": "tool_use", "id": f"t{len(body['messages'])}", "name": "read_file",
                       "input": {"path": f"f{len(body['messages'])}"}}], stop_reason="tool_use")

    tracing = Tracing(db)
    instrumentor = AnthropicInstrumentor(tracing, guard=Guard(max_usd=0.01, max_calls=4)).instrument()
    client = anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:1", max_retries=0)
    try:
        with MessagesServer(unpriced) as server, caplog.at_level(logging.WARNING, "looptrace.guard"):
            client = client_for(server)
            messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
            with pytest.raises(GuardTripped) as tripped:
                for _ in range(10):
                    reply = client.messages.create(model="mystery-model", max_tokens=64, messages=messages)
                    messages += [{"role": "assistant", "content": [b.model_dump() for b in reply.content]},
                                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": reply.content[0].id,
                                                               "content": "ok"}]}]
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert tripped.value.finding.rule == "max_calls" and tripped.value.finding.unpriced_calls == 4
    said = [r.getMessage() for r in caplog.records if "no price" in r.getMessage()]
    assert len(said) == 1 and "mystery-model" in said[0]
    assert len(events_named(db, "guard_unpriced")) == 1


def test_the_tracer_keeps_working_after_a_trip(db: Path, server: MessagesServer) -> None:
    tracing, instrumentor = guarded(db, Guard(max_repeats=3))
    try:
        with pytest.raises(GuardTripped):
            agent(client_for(server))
        reply = client_for(server).messages.create(
            model=MODEL, max_tokens=64, messages=[{"role": "user", "content": [
                {"type": "text", "text": "What do my notes say?"}]}, {"role": "assistant", "content": "reading"},
                {"role": "user", "content": "ship it"}])
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert reply.content[0].text == "notes.txt says: ship it"
    assert sorted(query(db, "SELECT status FROM runs")) == [("ok",), ("stagnated",)]


def test_the_manual_api_takes_a_guard(db: Path) -> None:
    request = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}
    response = {"content": [{"type": "text", "text": "y"}], "usage": {"input_tokens": 10, "output_tokens": 2}}
    with Tracing(db) as tracing:
        with pytest.raises(GuardTripped) as tripped:
            with tracing.run("manual", task="t", guard=Guard(max_calls=2)) as run:
                for _ in range(5):
                    with run.step() as step, step.llm_call(request) as call:
                        call.response(response)
    assert tripped.value.finding.calls == 2
    assert query(db, "SELECT status, n_steps, n_llm_calls FROM runs") == [("max_iters", 3, 2)]


def test_context_limit_is_checked_on_the_request_about_to_go(db: Path, server: MessagesServer) -> None:
    tracing, instrumentor = guarded(db, Guard(max_context_tokens=50))
    try:
        client = client_for(server)
        client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(GuardTripped, match="max_context_tokens=50"):
            client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x" * 2000}])
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert len(server.requests) == 1
    assert ("context_overflow",) in query(db, "SELECT status FROM runs")


@pytest.mark.parametrize("kwargs", [{"action": "halt"}, {"max_repeats": 1}, {"max_usd": 0}, {"max_calls": 2.5}])
def test_a_guard_with_a_bad_limit_says_so(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="Guard"):
        Guard(**kwargs)
