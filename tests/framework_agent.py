"""One scripted agent on a real framework or instrumented SDK, exporting OTLP/HTTP: the conformance client.

usage: python -m tests.framework_agent CLIENT MODEL_URL OTLP_URL
MODEL_URL is the scripted Chat Completions server's base URL (``.../v1``) for the OpenAI clients, the
scripted Messages server's for the Anthropic ones. OTLP_URL is the receiver's ``.../v1/traces`` URL, or
``grpc://HOST:PORT`` to export over OTLP/gRPC, or ``file:PATH`` to write the SDK's span JSON there with
its ``ConsoleSpanExporter``. The ``openai+genai:MODE`` clients (``GENAI_LOG_MODES``)
run the official GenAI instrumentor in a content mode that sends log records, with the SDK's OTLP log
exporter beside the trace exporter. The model's script (``conversation_turn``) decides each
answer from the request alone: turn 1 calls ``read_file {"path": "a.txt"}``, turn 2 the undeclared
``delete_everything {"force": true}``, turn 3 ``read_file {"path": "b.txt"}``, turn 4 answers. Each client
runs in its own process because instrumentors patch their SDK globally and cannot all be loaded at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from typing import Any

TASK = "Read a.txt and b.txt and summarise them."
ANSWER = "a.txt and b.txt are both short files."
TURNS = [("read_file", {"path": "a.txt"}), ("delete_everything", {"force": True}), ("read_file", {"path": "b.txt"})]
OPENAI_MODEL, ANTHROPIC_MODEL = "gpt-4o-mini", "claude-haiku-4-5"
READ_FILE_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def read_file(path: str) -> str:
    """Read a file and return its contents."""
    return f"contents of {path}"


def conversation_turn(messages: list[dict[str, Any]]) -> int:
    """1-based turn: one more than the tool results the request already holds (``tool`` messages, Anthropic
    ``tool_result`` blocks, or smolagents' "Observation:" / "Unknown tool" text, which it folds into one
    user message when a step fails)."""
    results = 0
    for m in messages:
        results += m.get("role") == "tool"
        for b in m.get("content") if isinstance(m.get("content"), list) else ():
            if not isinstance(b, dict):
                continue
            results += b.get("type") == "tool_result"
            text = b.get("text")
            if m.get("role") == "user" and isinstance(text, str) and text.startswith("Observation:"):
                results += text.count("Observation:") + text.count("Unknown tool")
    return 1 + results


def openai_script(final_tool: str | None = None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        turn = conversation_turn(body.get("messages", []))
        if turn <= len(TURNS):
            name, args = TURNS[turn - 1]
            return {"tool_calls": [{"id": f"call_{turn}", "name": name, "arguments": json.dumps(args)}]}
        if final_tool:
            return {"tool_calls": [{"id": f"call_{turn}", "name": final_tool,
                                    "arguments": json.dumps({"answer": ANSWER})}]}
        return {"content": ANSWER}
    return answer


def anthropic_script(body: dict[str, Any]) -> Any:
    from looptrace.loop.replies import Reply
    turn = conversation_turn(body.get("messages", []))
    if turn <= len(TURNS):
        name, args = TURNS[turn - 1]
        return Reply(content=({"type": "tool_use", "id": f"toolu_{turn}", "name": name, "input": args},),
                     stop_reason="tool_use")
    return Reply(content=({"type": "text", "text": ANSWER},), stop_reason="end_turn")


# -- the clients ---------------------------------------------------------------------------------------


def _run_tool(name: str, args: dict[str, Any]) -> str:
    if name == "read_file":
        return read_file(**args)
    return f"Unknown tool {name!r}: available tools are ['read_file']"


def plain_openai(url: str) -> None:
    import openai
    client = openai.OpenAI(base_url=url, api_key="test", max_retries=0)
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                               "parameters": READ_FILE_SCHEMA}}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for _ in range(6):
        reply = client.chat.completions.create(model=OPENAI_MODEL, messages=messages, tools=tools)  # type: ignore
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return
        for call in message.tool_calls:
            result = _run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})


def plain_anthropic(url: str) -> None:
    import anthropic
    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
    tools = [{"name": "read_file", "description": "Read a file", "input_schema": READ_FILE_SCHEMA}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for _ in range(6):
        reply = client.messages.create(model=ANTHROPIC_MODEL, max_tokens=512, messages=messages,  # type: ignore
                                       tools=tools)  # type: ignore
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        uses = [b for b in reply.content if b.type == "tool_use"]
        if not uses:
            return
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": _run_tool(b.name, dict(b.input))}  # type: ignore
            for b in uses]})


def openai_agents(url: str) -> None:
    import agents
    from openai import AsyncOpenAI
    client = AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
    model = agents.OpenAIChatCompletionsModel(model=OPENAI_MODEL, openai_client=client)
    agent = agents.Agent(name="file_agent", instructions="You read files.", model=model,
                         tools=[agents.function_tool(read_file)])
    # Without it the SDK ends the run with ModelBehaviorError at the undeclared tool.
    config = agents.RunConfig(tool_not_found_behavior="return_error_to_model")
    agents.Runner.run_sync(agent, TASK, run_config=config)


def langgraph_agent(url: str) -> None:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent
    model = ChatOpenAI(model=OPENAI_MODEL, base_url=url, api_key="test", max_retries=0)  # type: ignore
    agent = create_react_agent(model, [tool(read_file)], name="file_agent")
    agent.invoke({"messages": [("user", TASK)]})


def smolagents_agent(url: str) -> None:
    import smolagents
    model = smolagents.OpenAIServerModel(model_id=OPENAI_MODEL, api_base=url, api_key="test")

    @smolagents.tool
    def read_file(path: str) -> str:
        """Read a file and return its contents.

        Args:
            path: the file to read.
        """
        return f"contents of {path}"

    agent = smolagents.ToolCallingAgent(tools=[read_file], model=model, max_steps=6, name="file_agent")
    agent.run(TASK)


def pydantic_ai_agent(url: str) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    model = OpenAIChatModel(OPENAI_MODEL, provider=OpenAIProvider(base_url=url, api_key="test"))
    Agent.instrument_all(True)  # pydantic-ai's built-in OpenTelemetry, on the global tracer provider
    agent = Agent(model, name="file_agent", tools=[read_file])
    agent.run_sync(TASK)


# Content modes of the official GenAI instrumentor that send log records: (opt in to the latest
# conventions, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT).
GENAI_LOG_MODES = {
    "legacy_events": (False, "true"),
    "event_only": (True, "EVENT_ONLY"),
    "span_and_event": (True, "SPAN_AND_EVENT"),
}


def _instrument(client: str, provider: Any, logger_provider: Any = None) -> None:
    """Install the instrumentor ``client`` names, on ``provider``."""
    if client.startswith("openai-agents"):
        import agents
        agents.set_trace_processors([])  # the SDK's default processor posts traces to OpenAI
    if client == "openai-agents+openinference":
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
    elif client == "openai-agents+openllmetry":
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor as TlAgents
        TlAgents().instrument(tracer_provider=provider)
    elif client == "langgraph+openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor
        LangChainInstrumentor().instrument(tracer_provider=provider)
    elif client == "smolagents+openinference":
        from openinference.instrumentation.smolagents import SmolagentsInstrumentor
        SmolagentsInstrumentor().instrument(tracer_provider=provider)
    elif client == "openai+openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
        OpenAIInstrumentor().instrument(tracer_provider=provider)
    elif client == "openai+openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as TlOpenAI
        TlOpenAI().instrument(tracer_provider=provider)
    elif client.startswith("openai+genai"):
        import opentelemetry.instrumentation.openai_v2 as genai_v2
        if client == "openai+genai:legacy_events":
            # The instrumentor's long-standing event path (per-message events) is taken when the latest
            # conventions are not opted in; but the util-genai its pin allows (1.1b0) answers "opted in"
            # whatever the environment says. Ask the environment, as util-genai did before 1.1: the
            # events are then the instrumentor's own legacy code's.
            genai_v2.is_experimental_mode = lambda: "gen_ai_latest_experimental" in os.environ.get(
                "OTEL_SEMCONV_STABILITY_OPT_IN", "")
        genai_v2.OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logger_provider)
    elif client == "anthropic+openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor
        AnthropicInstrumentor().instrument(tracer_provider=provider)
    elif client == "anthropic+openllmetry":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as TlAnthropic
        TlAnthropic().instrument(tracer_provider=provider)


CLIENTS: dict[str, Callable[[str], None]] = {
    "openai-agents+openinference": openai_agents,
    "openai-agents+openllmetry": openai_agents,
    "langgraph+openinference": langgraph_agent,
    "smolagents+openinference": smolagents_agent,
    "pydantic-ai": pydantic_ai_agent,
    "openai+openinference": plain_openai,
    "openai+openllmetry": plain_openai,
    "openai+genai": plain_openai,
    "anthropic+openinference": plain_anthropic,
    "anthropic+openllmetry": plain_anthropic,
}
LOG_CLIENTS = {f"openai+genai:{mode}": plain_openai for mode in GENAI_LOG_MODES}


def main() -> None:
    client, model_url, otlp_url = sys.argv[1:4]
    # Content capture is opt-in for the GenAI instrumentors; a user who wants steps turns it on.
    # (the official GenAI instrumentor wants a mode, and the latest conventions opted in).
    if client == "openai+genai":
        os.environ.setdefault("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
        os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    elif client in LOG_CLIENTS:
        latest, capture = GENAI_LOG_MODES[client.partition(":")[2]]
        if latest:
            os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
    else:
        os.environ.setdefault("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    resource = Resource.create({"service.name": f"conformance-{client}"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(_span_exporter(otlp_url)))
    trace.set_tracer_provider(provider)
    logger_provider = _logger_provider(otlp_url, resource) if client in LOG_CLIENTS else None
    _instrument(client, provider, logger_provider)
    result = {**CLIENTS, **LOG_CLIENTS}[client](model_url)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
    provider.force_flush()
    provider.shutdown()
    if logger_provider is not None:
        logger_provider.force_flush()
        logger_provider.shutdown()


def _span_exporter(otlp_url: str) -> Any:
    if otlp_url.startswith("file:"):  # the SDK's own span JSON, as a developer writes it to a file
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter
        return ConsoleSpanExporter(out=open(otlp_url.removeprefix("file:"), "w", encoding="utf-8"))  # noqa: SIM115
    if otlp_url.startswith("grpc://"):
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans
        return GrpcSpans(endpoint="http://" + otlp_url.removeprefix("grpc://"), insecure=True)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    return OTLPSpanExporter(endpoint=otlp_url)


def _logger_provider(otlp_url: str, resource: Any) -> Any:
    """The SDK's logger provider exporting OTLP beside the spans: log batches are sent on their own
    schedule (``LOG_DELAY_MS``, default the SDK's), so they may reach the receiver after their spans."""
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    if otlp_url.startswith("grpc://"):
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
        exporter: Any = GrpcLogs(endpoint="http://" + otlp_url.removeprefix("grpc://"), insecure=True)
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        exporter = OTLPLogExporter(endpoint=otlp_url.replace("/v1/traces", "/v1/logs"))
    logger_provider = LoggerProvider(resource=resource)
    delay = int(os.environ.get("LOG_DELAY_MS", "1000"))
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(exporter, schedule_delay_millis=delay))
    return logger_provider


if __name__ == "__main__":
    main()
