"""Code-action agents and any-agent's GenAI spelling, on the real packages: the clients of test_code_actions.

usage: python -m tests.codeact_agent CLIENT MODEL_URL (OTLP_URL | --export DIR)

CLIENT is one of ``CLIENTS``. MODEL_URL is a scripted Chat Completions server's base URL; its script is
``script`` below, which answers from the request alone (so a retried request gets the same answer):

- ``smolagents-managed``: a smolagents ``CodeAgent`` manager (OpenInference) whose code calls a managed
  ``ToolCallingAgent`` (``file_agent``), then a tool with a positional argument, then ``final_answer("...")``.
  The sub-agent calls ``read_file`` on a missing file three times in a row (the tool raises), then reads
  the notes and answers: a loop it recovered from.
- ``smolagents-tool-manager``: the same managed agent and loop under a ``ToolCallingAgent`` manager, which
  calls ``file_agent`` as a tool call of its message, then ``final_answer``.
- ``smolagents-code``: a ``CodeAgent`` alone on the small task (read a.txt, read b.txt, answer).
- ``smolagents-code-unknown``: a ``CodeAgent`` whose code calls a tool it lacks, then answers.
- ``smolagents-code-loop``: a ``CodeAgent`` whose code first calls nothing, then reads the missing file three
  times in a row (the code fails each time), then the notes, then answers.
- ``any-agent-tinyagent``, ``any-agent-langchain``: any-agent's own tracing (``gen_ai.tool.args``,
  ``gen_ai.output``) on the small task, on its TinyAgent and its LangChain (LangGraph) agent.

With OTLP_URL the spans go live to a receiver over OTLP/HTTP; with ``--export DIR`` they are kept in
memory and written to DIR as OTLP JSON (``otlp.json``) and as a nested span tree (``tree.json``), the
containers ``looptrace import`` reads. Each client runs in its own process: instrumentors patch globally.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

TASK = "Read a.txt and b.txt and summarise them."
ANSWER = "a.txt and b.txt are both short files."
NOTES = "The notes say hello."
MANAGED_TASK = "Read missing.txt, or notes.txt if it is missing."
MISSING_TRIES = 3
MODEL = "gpt-4o-mini"

# The manager's code, one block per turn: the managed agent, a tool with a positional argument, the end.
MANAGER_CODE = [
    f'report = file_agent(task="{MANAGED_TASK}")\nprint(report)',
    f'print(word_count("{NOTES}"))',
    f'final_answer("{NOTES}")',
]
LOOP_CODE = ['print("looking")', *['print(read_file("missing.txt"))'] * MISSING_TRIES,
             'print(read_file("notes.txt"))', f'final_answer("{NOTES}")']
UNKNOWN_CODE = ['delete_everything(force=True)', f'final_answer("{NOTES}")']
SMALL_CODE = ['print(read_file("a.txt"))', 'print(read_file(path="b.txt"))', f'final_answer("{ANSWER}")']


def _texts(body: dict[str, Any]) -> str:
    return json.dumps([m for m in body.get("messages", []) if m.get("role") != "system"])


def _code_turn(body: dict[str, Any], code: list[str]) -> dict[str, Any]:
    """A CodeAgent's turn: one more than the answers it already gave (each of its steps is one)."""
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    return {"content": f"Thought: next step.\n<code>\n{code[min(done, len(code) - 1)]}\n</code>"}


def _calls(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": json.dumps(args)}]}


def managed_script(body: dict[str, Any]) -> dict[str, Any]:
    if not body.get("tools"):  # the CodeAgent manager asks for text
        return _code_turn(body, MANAGER_CODE)
    if any(t.get("function", {}).get("name") == "file_agent" for t in body["tools"]):  # a ToolCallingAgent manager
        if "Observation:" not in _texts(body):
            return _calls("file_agent", {"task": MANAGED_TASK})
        return _calls("final_answer", {"answer": NOTES})
    # The ToolCallingAgent folds each earlier step into the request as an observation or an error.
    text = _texts(body)
    done = text.count("Observation:") + text.count("Now let's retry")
    if done < MISSING_TRIES:
        return _calls("read_file", {"path": "missing.txt"})
    if done == MISSING_TRIES:
        return _calls("read_file", {"path": "notes.txt"})
    return _calls("final_answer", {"answer": NOTES})


def loop_script(body: dict[str, Any]) -> dict[str, Any]:
    return _code_turn(body, LOOP_CODE)


def unknown_script(body: dict[str, Any]) -> dict[str, Any]:
    return _code_turn(body, UNKNOWN_CODE)


def small_script(body: dict[str, Any]) -> dict[str, Any]:
    """The small task: read a.txt, read b.txt, answer (as text, or with the agent's final-answer tool)."""
    if not body.get("tools"):
        return _code_turn(body, SMALL_CODE)
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool") + _texts(body).count("Observation:")
    if done < 2:
        return _calls("read_file", {"path": ["a.txt", "b.txt"][done]})
    if any(t.get("function", {}).get("name") == "final_answer" for t in body["tools"]):
        return _calls("final_answer", {"answer": ANSWER})
    return {"content": ANSWER}


def read_file(path: str) -> str:
    """Read a file and return its contents.

    Args:
        path: the file to read.
    """
    if path == "missing.txt":
        raise FileNotFoundError(f"No such file: {path}")
    return NOTES if path == "notes.txt" else f"contents of {path}"


# -- the clients ---------------------------------------------------------------------------------------


def _smolagents_model(url: str) -> Any:
    import smolagents
    return smolagents.OpenAIServerModel(model_id=MODEL, api_base=url, api_key="test")


def smolagents_managed(url: str) -> None:
    import smolagents

    def word_count(text: str) -> int:
        """Count the words of a text.

        Args:
            text: the text.
        """
        return len(text.split())

    model = _smolagents_model(url)
    file_agent = smolagents.ToolCallingAgent(tools=[smolagents.tool(read_file)], model=model, max_steps=8,
                                             name="file_agent", description="Reads files.")
    manager = smolagents.CodeAgent(tools=[smolagents.tool(word_count)], model=model, managed_agents=[file_agent],
                                   max_steps=6)
    manager.run("Tell me what the notes say.")


def smolagents_tool_manager(url: str) -> None:
    import smolagents
    model = _smolagents_model(url)
    file_agent = smolagents.ToolCallingAgent(tools=[smolagents.tool(read_file)], model=model, max_steps=8,
                                             name="file_agent", description="Reads files.")
    manager = smolagents.ToolCallingAgent(tools=[], model=model, managed_agents=[file_agent], max_steps=6)
    manager.run("Tell me what the notes say.")


def smolagents_code(url: str) -> None:
    import smolagents
    agent = smolagents.CodeAgent(tools=[smolagents.tool(read_file)], model=_smolagents_model(url), max_steps=8)
    agent.run(TASK)


def _any_agent(framework: str, url: str) -> None:
    # any-agent 1.18 imports mcp's streamable HTTP client under its 1.x name; the pinned mcp 2.x renamed it.
    import mcp.client.streamable_http as streamable
    if not hasattr(streamable, "streamablehttp_client"):
        streamable.streamablehttp_client = streamable.streamable_http_client  # type: ignore[attr-defined]
    from any_agent import AgentConfig, AnyAgent
    config = AgentConfig(model_id=f"openai:{MODEL}", instructions="You read files.", tools=[read_file],
                         api_base=url, api_key="test", name="file_agent")
    AnyAgent.create(framework, config).run(TASK)


def any_agent_tinyagent(url: str) -> None:
    _any_agent("tinyagent", url)


def any_agent_langchain(url: str) -> None:
    _any_agent("langchain", url)


CLIENTS: dict[str, Callable[[str], None]] = {
    "smolagents-managed": smolagents_managed,
    "smolagents-tool-manager": smolagents_tool_manager,
    "smolagents-code": smolagents_code,
    "smolagents-code-loop": smolagents_code,
    "smolagents-code-unknown": smolagents_code,
    "any-agent-tinyagent": any_agent_tinyagent,
    "any-agent-langchain": any_agent_langchain,
}
SCRIPTS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "smolagents-managed": managed_script, "smolagents-tool-manager": managed_script,
    "smolagents-code": small_script, "smolagents-code-loop": loop_script,
    "smolagents-code-unknown": unknown_script,
    "any-agent-tinyagent": small_script, "any-agent-langchain": small_script,
}


def main() -> None:
    client, model_url, target = sys.argv[1:4]
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider(resource=Resource.create({"service.name": f"codeact-{client}"}))
    memory = InMemorySpanExporter()
    if target == "--export":
        provider.add_span_processor(SimpleSpanProcessor(memory))
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=target)))
    trace.set_tracer_provider(provider)  # any-agent traces on the global provider
    if client.startswith("smolagents"):
        from openinference.instrumentation.smolagents import SmolagentsInstrumentor
        SmolagentsInstrumentor().instrument(tracer_provider=provider)
    CLIENTS[client](model_url)
    provider.force_flush()
    if target == "--export":
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

        from .span_writer import otlp_hex_ids, tree
        out = Path(sys.argv[4])
        out.mkdir(parents=True, exist_ok=True)
        spans = list(memory.get_finished_spans())
        (out / "otlp.json").write_text(json.dumps(otlp_hex_ids(MessageToDict(encode_spans(spans)))))
        (out / "tree.json").write_text(json.dumps(tree(spans)))
    provider.shutdown()


if __name__ == "__main__":
    main()
