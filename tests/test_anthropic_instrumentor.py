"""The Anthropic instrumentor, driven through the real SDK against the local Messages API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from looptrace.loop.server import Fault, MessagesServer, Reply
from looptrace.tracer import Tracing
from looptrace.tracer.spans.anthropic import AnthropicInstrumentor

from .conftest import query

MODEL = "claude-haiku-4-5"
FILES = {"a.txt": "alpha", "b.txt": "bravo"}
TOOLS = [{"name": "read_file", "description": "Read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]


def tool_use(i: int, path: str) -> Reply:
    return Reply([{"type": "text", "text": f"I will read {path}."},
                  {"type": "tool_use", "id": f"toolu_{i}", "name": "read_file", "input": {"path": path}}],
                 stop_reason="tool_use", usage={"input_tokens": 100 * i, "output_tokens": 20})


@pytest.fixture
def tracing(db: Path) -> Iterator[Tracing]:
    tracing = Tracing(db)
    instrumentor = AnthropicInstrumentor(tracing).instrument()
    yield tracing
    instrumentor.uninstrument()
    tracing.shutdown()


def sdk(server: MessagesServer, tracing: Tracing, **kw: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=kw.pop("max_retries", 0),
                               open_telemetry={"tracer_provider": tracing.provider}, **kw)


def small_agent(client: anthropic.Anthropic, task: str) -> str:
    """A 20-line agent written without looptrace: the instrumentor alone traces it."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    while True:
        reply = client.messages.create(model=MODEL, max_tokens=512, system="Be brief.", tools=TOOLS,
                                       messages=messages)
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": c.id, "content": FILES.get(c.input["path"], "no such file"),
             "is_error": c.input["path"] not in FILES} for c in calls]})


def test_an_uninstrumented_agent_becomes_a_run_with_steps(db: Path, tracing: Tracing) -> None:
    script = [Fault(529), tool_use(1, "a.txt"), tool_use(2, "zzz.txt"),
              Reply([{"type": "text", "text": "a.txt says alpha"}], usage={"input_tokens": 300, "output_tokens": 5})]
    with MessagesServer(script) as server:
        answer = small_agent(sdk(server, tracing, max_retries=2), "What is in a.txt?")
    tracing.shutdown()
    assert answer == "a.txt says alpha"
    assert query(db, "SELECT agent, task, model, status, n_steps, answer, input_tokens, output_tokens FROM runs") == [
        ("anthropic-client", "What is in a.txt?", MODEL, "ok", 3, "a.txt says alpha", 600, 45)]
    assert query(db, "SELECT step, thought, tool, args, observation, is_error FROM steps ORDER BY step") == [
        (1, "I will read a.txt.", "read_file", '{"path":"a.txt"}', "alpha", False),
        (2, "I will read zzz.txt.", "read_file", '{"path":"zzz.txt"}', "no such file", True),
        (3, "a.txt says alpha", None, None, None, False),
    ]
    calls = query(db, "SELECT step, stop_reason, retries, messages_keep, error FROM llm_calls ORDER BY step")
    assert calls == [(1, "tool_use", 1, 0, None), (2, "tool_use", 0, 1, None), (3, "end_turn", 0, 3, None)]
    # The SDK's own span is kept and nests under looptrace's chat span.
    assert query(db, """SELECT count(*) FROM spans s JOIN spans p ON s.parent_span_id = p.span_id
                        WHERE s.name = 'anthropic.messages.create' AND p.name = 'chat claude-haiku-4-5'""") == [(3,)]
    [(system, tools)] = query(db, "SELECT system, tools FROM llm_call_records WHERE system IS NOT NULL")
    assert json.loads(system) == "Be brief." and json.loads(tools) == TOOLS


def test_retries_are_counted_without_the_sdks_own_span(db: Path, tracing: Tracing) -> None:
    # A client that does not trace into looptrace's provider (the SDK's default, with no global provider):
    # its own span is not recorded, so the chat span is not made current for it, and the instrumentor
    # counts the SDK's retries itself.
    script = [Fault(529, retry_after=0.01), Fault(500, "api_error", retry_after=0.01), tool_use(1, "a.txt"),
              Reply([{"type": "text", "text": "a.txt says alpha"}]),
              Fault(529, retry_after=0.01), Reply([{"type": "text", "text": "ok"}])]
    with MessagesServer(script) as server:
        client = anthropic.Anthropic(api_key="test", base_url=server.base_url, max_retries=2)
        answer = small_agent(client, "What is in a.txt?")

        async def async_call() -> None:  # the async client's retries too
            aclient = anthropic.AsyncAnthropic(api_key="t", base_url=server.base_url, max_retries=1)
            await aclient.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])

        asyncio.run(async_call())
    tracing.shutdown()
    assert answer == "a.txt says alpha"
    assert query(db, "SELECT step, stop_reason, retries, error FROM llm_calls ORDER BY started_at") == [(1, "tool_use", 2, None), (2, "end_turn", 0, None), (1, "end_turn", 1, None)]
    assert query(db, "SELECT count(*) FROM spans WHERE name LIKE 'anthropic.%'") == [(0,)]
    # The request id the SDK's span kept is on the chat span: the server's id of the answered attempt.
    ids = query(db, """SELECT attributes->>'$."anthropic.request.id"' FROM spans WHERE name LIKE 'chat %'
                       ORDER BY start_time""")
    assert ids == [("req_000000000000000000000003",), ("req_000000000000000000000004",),
                   ("req_000000000000000000000006",)]
    events = query(db, "SELECT events FROM spans WHERE name = 'chat claude-haiku-4-5' ORDER BY start_time")
    assert [[(e["name"], e["attributes"]) for e in json.loads(row[0] or "[]")] for row in events][:1] == [
        [("retry", {"attempt": 1, "error": "HTTP 529"}), ("retry", {"attempt": 2, "error": "HTTP 500"})]]


def test_streaming_and_async_calls_are_recorded(db: Path, tracing: Tracing) -> None:
    hello = Reply([{"type": "text", "text": "Hello there"}])
    with MessagesServer([hello, hello, hello]) as server:
        client = sdk(server, tracing)
        request = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        events = [e.type for e in client.messages.create(**request, stream=True)]
        with client.messages.stream(**request) as stream:
            final = stream.get_final_message()

        async def async_call() -> None:
            aclient = anthropic.AsyncAnthropic(api_key="t", base_url=server.base_url, max_retries=0)
            await aclient.messages.create(**request)

        asyncio.run(async_call())
    tracing.shutdown()
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert final.content[0].text == "Hello there"
    rows = query(db, "SELECT json_extract_string(response, '$.content[0].text'), stop_reason FROM llm_call_records")
    assert rows == [("Hello there", "end_turn")] * 3
    assert query(db, "SELECT status, n_steps FROM runs") == [("ok", 1)] * 3


def test_calls_inside_a_manual_step_attach_to_it(db: Path, tracing: Tracing) -> None:
    with MessagesServer([tool_use(1, "a.txt")]) as server:
        client = sdk(server, tracing)
        with tracing.run("mine", task="t") as run, run.step() as step:
            client.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "x"}])
            step.thought("own thought")
    tracing.shutdown()
    assert query(db, "SELECT agent, n_steps, n_llm_calls, input_tokens FROM runs") == [("mine", 1, 1, 100)]
    assert query(db, "SELECT step, stop_reason FROM llm_calls") == [(1, "tool_use")]


def test_errors_reach_the_agent_unchanged_and_are_recorded(db: Path, tracing: Tracing) -> None:
    with MessagesServer([Fault(400, "invalid_request_error", "prompt is too long")]) as server:
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
            sdk(server, tracing).messages.create(model=MODEL, max_tokens=8,
                                                 messages=[{"role": "user", "content": "x"}])
    tracing.shutdown()
    [(status, error)] = query(db, "SELECT status, error FROM runs")
    assert status == "error" and "prompt is too long" in error
    [(call_error,)] = query(db, "SELECT error FROM llm_calls")
    assert "BadRequestError" in call_error


def test_uninstrument_restores_the_client(db: Path) -> None:
    from anthropic.resources.messages import Messages

    original = Messages.create
    tracing = Tracing(db)
    instrumentor = AnthropicInstrumentor(tracing).instrument()
    assert Messages.create is not original
    instrumentor.uninstrument()
    assert Messages.create is original
    tracing.shutdown()


def test_the_last_tool_call_before_the_agent_stops_is_kept(db: Path, tracing: Tracing) -> None:
    """A response's tool calls are recorded when it arrives: an agent that stops after asking (its own cap,
    a crash) keeps its last call, with no result; the ones answered get theirs from the next request."""
    with MessagesServer([tool_use(1, "a.txt"), tool_use(2, "b.txt")]) as server:
        client = sdk(server, tracing)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Read both files."}]
        for _ in range(2):  # the agent's own cap: two calls, then it stops without running the second tool
            reply = client.messages.create(model=MODEL, max_tokens=64, tools=TOOLS, messages=messages)
            [use] = [b for b in reply.content if b.type == "tool_use"]
            messages += [{"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                                       "content": FILES[use.input["path"]]}]}]
    tracing.shutdown()
    assert query(db, "SELECT step, tool, tool_call_id, args, observation, is_error FROM steps ORDER BY step") == [
        (1, "read_file", "toolu_1", '{"path":"a.txt"}', "alpha", False),
        (2, "read_file", "toolu_2", '{"path":"b.txt"}', None, False),
    ]
    # Each call starts as the response asking for it arrives (not when the next request is sent).
    rows = query(db, """SELECT t.step, t.started_at >= l.ended_at FROM tool_calls t JOIN llm_calls l USING (run_id, step)
                        ORDER BY t.step""")
    assert rows == [(1, True), (2, True)]
    assert query(db, "SELECT status, n_steps, n_llm_calls FROM runs") == [("incomplete", 2, 2)]


def test_a_crashed_agent_keeps_its_last_tool_call(tmp_path: Path) -> None:
    """The process dies of an uncaught exception right after a response asked for a tool: the call is stored
    at exit (before the provider's own exit hook shuts the exporter down), unanswered."""
    import subprocess
    import textwrap

    from .conftest import PYTHON, python_env

    db = tmp_path / "crash.duckdb"
    script = textwrap.dedent(f"""
        import anthropic, sys
        from looptrace.tracer import Tracing
        from looptrace.tracer.spans.anthropic import AnthropicInstrumentor
        tracing = Tracing({str(db)!r})
        AnthropicInstrumentor(tracing).instrument()
        client = anthropic.Anthropic(api_key="test", base_url=sys.argv[1], max_retries=0)
        client.messages.create(model={MODEL!r}, max_tokens=64, messages=[{{"role": "user", "content": "Read a.txt"}}])
        raise RuntimeError("the agent crashed while running its tool")
    """)
    with MessagesServer([tool_use(1, "a.txt")]) as server:
        done = subprocess.run([PYTHON, "-c", script, server.base_url], env=python_env(), capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 1 and "the agent crashed" in done.stderr
    assert query(db, "SELECT step, tool, args, observation FROM steps") == [(1, "read_file", '{"path":"a.txt"}', None)]


def test_the_spans_sent_over_otlp_map_to_the_same_steps(db: Path) -> None:
    """What a user exporting to an OTLP endpoint sends (the same spans; ``looptrace collect`` maps them
    with the same mapping) gives the steps, tool calls and model calls the store holds: a step that is one
    model call is read from its chat span."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from looptrace.tracer.records.spans import from_readable, rows_for_spans

    tracing = Tracing(db)
    memory = InMemorySpanExporter()
    tracing.provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = AnthropicInstrumentor(tracing).instrument()
    script = [tool_use(1, "a.txt"), tool_use(2, "zzz.txt"), Reply([{"type": "text", "text": "a.txt says alpha"}])]
    try:
        with MessagesServer(script) as server:
            small_agent(sdk(server, tracing), "What is in a.txt?")
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    spans = memory.get_finished_spans()
    assert not [s for s in spans if s.name == "looptrace.step"]  # one span per call, not two
    assert {s.name.split(" ")[0] for s in spans} >= {"invoke_agent", "chat", "execute_tool"}
    rows = rows_for_spans([from_readable(s) for s in spans])
    step_columns = ("step", "thought", "input_tokens", "output_tokens", "context_tokens", "cost_usd")
    mapped = sorted(tuple(r[c] for c in step_columns) for r in rows["step_records"])
    assert mapped == query(db, f"SELECT {', '.join(step_columns)} FROM step_records ORDER BY step")
    assert len(mapped) == 3 and all(r[2] and r[4] == r[2] and r[5] for r in mapped)  # usage, context, cost
    assert [r[1] for r in mapped] == ["I will read a.txt.", "I will read zzz.txt.", "a.txt says alpha"]
    assert sorted((r["step"], r["tool"], r["observation"]) for r in rows["tool_call_records"]) == [
        (1, "read_file", "alpha"), (2, "read_file", "no such file")]
    assert len(rows["llm_call_records"]) == 3
