"""The OpenAI instrumentor, driven through the real ``openai`` SDK against the scripted server on 127.0.0.1:
Chat Completions and Responses, sync, async and streamed, recorded whole; and the guard on top of it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.replay.analyzer import analyze_store
from looptrace.replay.recording import load_recording
from looptrace.replay.serve import OpenAIRecordingHandler, is_openai
from looptrace.tracer.store import Store
from looptrace.tracer import Guard, GuardTripped, Tracing
from looptrace.tracer.spans.openai import OpenAIInstrumentor

from .conftest import query

MODEL = "gpt-4o-mini"
TASK = "What is in a.txt?"
FILES = {"a.txt": "alpha"}
CHAT_TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
RESPONSE_TOOLS = [{"type": "function", "name": "read_file", "description": "Read a file",
                   "parameters": CHAT_TOOLS[0]["function"]["parameters"]}]


def results_in(body: dict[str, Any]) -> int:
    items = body.get("messages") or body.get("input") or []
    return sum(1 for m in items if isinstance(m, dict) and (m.get("role") == "tool"
                                                               or m.get("type") == "function_call_output"))


def two_reads(body: dict[str, Any]) -> dict[str, Any]:
    """Read a.txt, then zzz.txt, then answer."""
    n = results_in(body)
    if n < 2:
        path = ["a.txt", "zzz.txt"][n]
        return {"content": f"I will read {path}.", "tool_calls": [{"id": f"call_{n}", "name": "read_file",
                                                                   "arguments": json.dumps({"path": path})}]}
    return {"content": "a.txt says alpha"}


@pytest.fixture
def tracing(db: Path) -> Iterator[Tracing]:
    tracing = Tracing(db)
    instrumentor = OpenAIInstrumentor(tracing).instrument()
    yield tracing
    instrumentor.uninstrument()
    tracing.shutdown()


def chat_agent(client: openai.OpenAI, stream: bool = False) -> str:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": TASK}]
    for _ in range(10):
        if stream:
            parts = list(client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS,  # type: ignore
                                                        stream=True, stream_options={"include_usage": True}))
            text = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            calls: dict[int, dict[str, Any]] = {}
            for p in parts:
                for c in (p.choices[0].delta.tool_calls or []) if p.choices else []:
                    slot = calls.setdefault(c.index, {"id": c.id, "name": "", "arguments": ""})
                    slot["name"] += c.function.name or ""
                    slot["arguments"] += c.function.arguments or ""
            message: dict[str, Any] = {"role": "assistant", "content": text or None}
            tool_calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                          for c in calls.values()]
        else:
            reply = client.chat.completions.create(model=MODEL, messages=messages, tools=CHAT_TOOLS)  # type: ignore
            message = reply.choices[0].message.model_dump(exclude_none=True)
            text = reply.choices[0].message.content or ""
            tool_calls = message.get("tool_calls") or []
        if tool_calls:
            message["tool_calls"] = tool_calls
        messages.append(message)
        if not tool_calls:
            return text
        for call in tool_calls:
            path = json.loads(call["function"]["arguments"])["path"]
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": FILES.get(path, "no such file")})
    raise AssertionError("no answer")


def responses_agent(client: openai.OpenAI, stream: bool = False) -> str:
    items: list[Any] = [{"role": "user", "content": TASK}]
    for _ in range(10):
        if stream:
            events = list(client.responses.create(model=MODEL, input=items, tools=RESPONSE_TOOLS, stream=True))  # type: ignore
            response = events[-1].response
        else:
            response = client.responses.create(model=MODEL, input=items, tools=RESPONSE_TOOLS)  # type: ignore
        calls = [o for o in response.output if o.type == "function_call"]
        items += [o.model_dump(exclude_none=True) for o in response.output]
        if not calls:
            return response.output_text
        items += [{"type": "function_call_output", "call_id": c.call_id,
                   "output": FILES.get(json.loads(c.arguments)["path"], "no such file")} for c in calls]
    raise AssertionError("no answer")


EXPECTED_STEPS = [(1, "I will read a.txt.", "read_file", '{"path":"a.txt"}', "alpha"),
                  (2, "I will read zzz.txt.", "read_file", '{"path":"zzz.txt"}', "no such file"),
                  (3, "a.txt says alpha", None, None, None)]


@pytest.mark.parametrize("api,stream", [("chat", False), ("chat", True), ("responses", False), ("responses", True)])
def test_an_uninstrumented_openai_agent_becomes_a_run_with_steps(db: Path, tracing: Tracing, api: str,
                                                                 stream: bool) -> None:
    with ChatCompletionsServer(two_reads) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        answer = (chat_agent if api == "chat" else responses_agent)(client, stream)
    tracing.shutdown()
    assert answer == "a.txt says alpha"
    assert query(db, "SELECT agent, task, model, status, n_steps, answer FROM runs") == [
        ("openai-client", TASK, MODEL, "ok", 3, "a.txt says alpha")]
    assert query(db, "SELECT step, thought, tool, args, observation FROM steps ORDER BY step") == EXPECTED_STEPS
    calls = query(db, "SELECT step, stop_reason, input_tokens > 0, output_tokens > 0, cost_usd > 0 FROM llm_calls "
                      "ORDER BY step")
    reasons = ["tool_calls", "tool_calls", "stop"] if api == "chat" else ["completed"] * 3
    assert calls == [(i + 1, r, True, True, True) for i, r in enumerate(reasons)]
    # The whole request and response are kept: what a replay of the run needs.
    [(tools, response)] = query(db, "SELECT tools, response FROM llm_call_records WHERE tools IS NOT NULL")
    assert json.loads(tools) == (CHAT_TOOLS if api == "chat" else RESPONSE_TOOLS)
    assert "read_file" in response


@pytest.mark.parametrize("api,stream", [("chat", False), ("chat", True), ("responses", False)])
def test_looptrace_serve_plays_an_openai_client_run_back(db: Path, tracing: Tracing, api: str, stream: bool) -> None:
    agent = chat_agent if api == "chat" else responses_agent
    with ChatCompletionsServer(two_reads) as live:
        agent(openai.OpenAI(base_url=live.base_url, api_key="test", max_retries=0), stream)
    tracing.shutdown()
    recording = load_recording(Store(db), query(db, "SELECT run_id FROM runs")[0][0], need_config=False)
    assert is_openai(recording)
    handler = OpenAIRecordingHandler(recording)
    with ChatCompletionsServer(handler) as served:
        client = openai.OpenAI(base_url=served.base_url, api_key="test", max_retries=0)
        assert agent(client, stream) == "a.txt says alpha"  # offline: every answer is the recorded one
        assert (handler.served, handler.drifts) == (3, [])
    with ChatCompletionsServer(OpenAIRecordingHandler(recording)) as served:
        client = openai.OpenAI(base_url=served.base_url, api_key="test", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="request 1 .* drifted from the recording"):
            client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "something else"}])


def test_the_sdks_retries_are_counted_on_the_call(db: Path, tracing: Tracing) -> None:
    answers = iter([{"status": 503, "error": {"message": "overloaded", "type": "server_error"}},
                    {"content": "hello after a retry"}])
    with ChatCompletionsServer(lambda body: next(answers)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=1)
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    tracing.shutdown()
    assert len(server.requests) == 2
    assert query(db, "SELECT retries, error FROM llm_calls") == [(1, None)]
    assert query(db, "SELECT status, answer FROM runs") == [("ok", "hello after a retry")]


def test_async_calls_are_recorded(db: Path, tracing: Tracing) -> None:
    async def run(url: str) -> None:
        client = openai.AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        stream = await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}],
                                                      stream=True)
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices]) == "hello there"
        await client.responses.create(model=MODEL, input="hi")

    with ChatCompletionsServer(lambda body: {"content": "hello there"}) as server:
        asyncio.run(run(server.base_url))
    tracing.shutdown()
    assert query(db, "SELECT status, n_steps, answer FROM runs") == [("ok", 1, "hello there")] * 3


def test_raw_responses_are_recorded_too(db: Path, tracing: Tracing) -> None:
    """``with_raw_response`` (LangChain's ChatOpenAI calls it) returns the HTTP response, parsed on demand."""
    with ChatCompletionsServer(lambda body: {"content": "raw hello"}) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=[{"role": "user", "content": "x"}])
        assert raw.parse().choices[0].message.content == "raw hello"
    tracing.shutdown()
    assert query(db, "SELECT status, answer FROM runs") == [("ok", "raw hello")]


def test_the_guard_stops_an_openai_loop(db: Path) -> None:
    def stuck(body: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": [{"name": "read_file", "arguments": '{"path": "zzz.txt"}'}]}

    tracing = Tracing(db)
    instrumentor = OpenAIInstrumentor(tracing, agent="stuck", guard=Guard(max_repeats=3)).instrument()
    try:
        with ChatCompletionsServer(stuck) as server, pytest.raises(GuardTripped) as tripped:
            chat_agent(openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert len(server.requests) == 3 and tripped.value.finding.steps == (1, 2, 3)
    assert query(db, "SELECT agent, status FROM runs") == [("stuck", "stagnated")]
    # Three calls that did not fail: below the analyzer's default repeat_min (5), at the guard's (3), which
    # the run records; the analyzer names the steps the guard named.
    [primary] = [d for r in analyze_store(Store(db)) for d in r.diagnoses if d.is_primary]
    assert (primary.label, primary.first_step, primary.last_step, primary.evidence["kind"]) == (
        "stagnation", 1, 3, "repeat")


def test_uninstrument_restores_the_client(db: Path) -> None:
    from openai.resources.chat.completions import Completions
    from openai.resources.responses import Responses

    originals = Completions.create, Responses.create
    tracing = Tracing(db)
    instrumentor = OpenAIInstrumentor(tracing).instrument()
    assert Completions.create is not originals[0] and Responses.create is not originals[1]
    instrumentor.uninstrument()
    assert (Completions.create, Responses.create) == originals
    tracing.shutdown()
