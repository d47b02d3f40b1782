"""One line of guard stops agents on real frameworks: the OpenAI Agents SDK, LangGraph, smolagents and
pydantic-ai (the ``frameworks`` extra), each looping on one failing tool call against the scripted Chat
Completions server on 127.0.0.1, under ``OpenAIInstrumentor(tracing, guard=Guard(max_repeats=3))``.

Each framework runs in this process with its own defaults; the instrumentor is removed after each.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.tracer import Guard, GuardTripped, Tracing
from looptrace.tracer.spans.openai import OpenAIInstrumentor

from .conftest import query

pytestmark = pytest.mark.slow

MODEL = "gpt-4o-mini"
TASK = "What do my notes say?"
MAX_REPEATS = 3


def read_file(path: str) -> str:
    """Read a file and return its contents."""
    raise FileNotFoundError(f"no such file: {path}")


def stuck(body: dict[str, Any]) -> dict[str, Any]:
    """A model that asks for the same missing file forever."""
    tool = "retried_read_file" if "retried_read_file" in str(body.get("tools")) else "read_file"
    return {"tool_calls": [{"name": tool, "arguments": '{"path": "notes.txt"}'}]}


def openai_agents(url: str) -> None:
    import agents
    from openai import AsyncOpenAI

    model = agents.OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=url, api_key="t",
                                                                                     max_retries=0))
    agent = agents.Agent(name="notes", instructions="Read files.", model=model, tools=[agents.function_tool(read_file)])
    agents.Runner.run_sync(agent, TASK, max_turns=50, run_config=agents.RunConfig(tracing_disabled=True))


def langgraph(url: str) -> None:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent

    model = ChatOpenAI(model=MODEL, base_url=url, api_key="t", max_retries=0)  # type: ignore[arg-type]
    tools = ToolNode([tool(read_file)], handle_tool_errors=True)  # the error goes back to the model
    create_react_agent(model, tools).invoke({"messages": [("user", TASK)]}, {"recursion_limit": 100})


def smolagents(url: str) -> None:
    import smolagents as smol

    @smol.tool
    def read_file(path: str) -> str:
        """Read a file and return its contents.

        Args:
            path: the file to read.
        """
        raise FileNotFoundError(f"no such file: {path}")

    model = smol.OpenAIServerModel(model_id=MODEL, api_base=url, api_key="t")
    smol.ToolCallingAgent(tools=[read_file], model=model, max_steps=50, verbosity_level=0).run(TASK)


def retried_read_file(path: str) -> str:
    """Read a file and return its contents."""
    from pydantic_ai import ModelRetry

    raise ModelRetry(f"no such file: {path}")  # pydantic-ai's way to hand a tool's error back to the model


def pydantic_ai(url: str, **run: Any) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key="t"))
    Agent(model, tools=[retried_read_file], retries=50).run_sync(TASK, **run)


FRAMEWORKS: dict[str, Callable[[str], None]] = {
    "openai-agents": openai_agents, "langgraph": langgraph, "smolagents": smolagents, "pydantic-ai": pydantic_ai,
}


def tripped_in(error: BaseException) -> GuardTripped | None:
    """The GuardTripped itself, or the one a framework wrapped (its ``__cause__`` / ``__context__`` chain)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, GuardTripped):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_line_of_guard_stops_a_framework_agent(framework: str, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    tracing = Tracing(db)
    guarded = OpenAIInstrumentor(tracing, agent=framework, guard=Guard(max_repeats=MAX_REPEATS)).instrument()
    try:
        with ChatCompletionsServer(stuck) as server, pytest.raises(Exception) as raised:
            FRAMEWORKS[framework](server.base_url)
    finally:
        guarded.uninstrument()
        tracing.shutdown()
    tripped = tripped_in(raised.value)
    assert tripped is not None, f"{type(raised.value).__name__}: {raised.value}"
    assert len(server.requests) <= MAX_REPEATS + 1
    assert tripped.finding.rule == "max_repeats" and len(tripped.finding.steps) == MAX_REPEATS
    assert query(db, "SELECT agent, status FROM runs") == [(framework, "stagnated")]
    assert query(db, "SELECT count(*) FROM steps WHERE tool LIKE '%read_file'") == [(MAX_REPEATS,)]


def test_without_a_guard_the_same_loop_runs_on(tmp_path: Path) -> None:
    """The same script with the instrumentor but no guard: nothing stops the loop but the framework's own cap."""
    from pydantic_ai.usage import UsageLimits

    tracing = Tracing(tmp_path / "store.duckdb")
    instrumentor = OpenAIInstrumentor(tracing).instrument()
    try:
        with ChatCompletionsServer(stuck) as server, pytest.raises(Exception) as raised:
            pydantic_ai(server.base_url, usage_limits=UsageLimits(request_limit=8))
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()
    assert tripped_in(raised.value) is None and len(server.requests) == 8
    # The eighth call's tool call is recorded as its response arrived; its result never came (the
    # framework stopped at its cap), so it is kept with none.
    calls = query(tmp_path / "store.duckdb", "SELECT step, observation IS NULL FROM steps "
                  "WHERE tool = 'retried_read_file' ORDER BY step")
    assert calls == [(step, step == 8) for step in range(1, 9)]
