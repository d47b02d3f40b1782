"""What each agent framework adds around the model's own messages, as tables: the one place to teach
looptrace a new framework. tests/test_frameworks_table.py has a test per entry (tests/test_code_actions.py
for the code-action entries).

Frameworks wrap what the model sent and what a tool returned (smolagents records a tool's Python call,
LangGraph a serialised ToolMessage), add spans that are not agents (an "Agent workflow" envelope, graph
nodes of kind AGENT), end runs with a built-in tool (smolagents' ``final_answer``), and report a call to a
tool the agent lacks in their own words. The readers below turn each back into what the model saw.

Code-action agents (smolagents' ``CodeAgent``, CodeAct-style agents) act by writing code that the framework
runs: the model's turn has no tool calls, only text with a code block. ``CODE_BLOCKS`` are the ways they
mark that code, and ``CODE_TOOL`` is the name a code step's own call is stored under when its code called
no tool (``code_actions.py`` reads the rest).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Unwrap", "ARGUMENT_WRAPPERS", "RESULT_WRAPPERS", "FINAL_ANSWER_TOOLS", "FINAL_ANSWER_SPANS",
    "ENVELOPE_AGENTS", "GRAPH_NODE_KEY", "UNKNOWN_TOOL_EVIDENCE", "DECLARED_TOOLS", "CODE_BLOCKS", "CODE_TOOL",
    "AGENT_RUN_SPANS", "unwrap", "final_answer", "is_unknown_tool", "is_envelope", "is_graph_node",
    "declared_in", "agent_called",
]


@dataclass(frozen=True)
class Unwrap:
    """A framework's wrapper object: recognised by holding all of ``keys``; the value sits at ``path``."""

    framework: str
    keys: frozenset[str]
    path: tuple[str, ...]
    positional: str | None = None  # the key of the arguments passed by position, if the wrapper keeps them


# A tool span's input, when it is the framework's record of the Python call rather than the model's JSON.
ARGUMENT_WRAPPERS: tuple[Unwrap, ...] = (
    # ``final_answer("...")`` written in a CodeAgent's code passes its answer by position, in ``args``.
    Unwrap("smolagents", frozenset({"args", "kwargs", "sanitize_inputs_outputs"}), ("kwargs",), "args"),
    Unwrap("langgraph", frozenset({"__type", "tool_call"}), ("tool_call", "args")),
)
# A tool span's output, when it is a framework's message object around the tool's return value.
RESULT_WRAPPERS: tuple[Unwrap, ...] = (
    Unwrap("langgraph", frozenset({"messages"}), ("messages", "-1", "data", "content")),  # a ToolNode's update
    Unwrap("langchain", frozenset({"type", "data"}), ("data", "content")),  # a serialised ToolMessage
    Unwrap("langchain", frozenset({"content", "tool_call_id"}), ("content",)),
)
# Built-in tools whose call ends the run: name -> the argument holding the answer (None: all arguments).
FINAL_ANSWER_TOOLS: Mapping[str, str | None] = {
    "final_answer": "answer",  # smolagents
    "final_result": None,  # pydantic-ai's output tool, when the agent has a structured output type
}
# Tool spans that are a final-answer tool by their span's name, whatever tool name they record: -> the tool.
FINAL_ANSWER_SPANS: Mapping[str, str] = {
    "FinalAnswerTool": "final_answer",  # smolagents (OpenInference names a tool span for its class)
}
# Agent-kind spans that wrap one agent and carry nothing of their own.
ENVELOPE_AGENTS: Mapping[str, str] = {
    "Agent workflow": "openai-agents (OpenInference)",
    "Agent Workflow": "openai-agents (OpenLLMetry)",
}
# LangGraph marks each node's span with its node name in ``metadata``; a node is a part of the graph's run.
GRAPH_NODE_KEY = "langgraph_node"
# How frameworks say that the model called a tool they do not have.
UNKNOWN_TOOL_EVIDENCE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("smolagents", re.compile(r"Unknown tool (\S+), should be one of")),
    ("smolagents-code", re.compile(r"Forbidden function evaluation: '([^']+)' is not among the explicitly")),
    ("openai-agents", re.compile(r"Tool '?([^' ]+)'? not found")),
    ("langgraph", re.compile(r"Error: (\S+) is not a valid tool")),
    ("pydantic-ai", re.compile(r"Unknown tool name: '?([^'\s.]+)'?")),
    ("any", re.compile(r"[Uu]nknown tool:? '?([^'\s:,.]+)'?")),
)
# How code-action agents mark the code of a turn: the code is group 1. smolagents >= 1.20 writes ``<code>``
# blocks, earlier versions and CodeAct-style agents a fenced Python block.
CODE_BLOCKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("smolagents", re.compile(r"<code>\s*\n?(.*?)\n?\s*</code>", re.DOTALL)),
    ("markdown", re.compile(r"```(?:python|py)\s*\n(.*?)\n?```", re.DOTALL)),
    ("codeact", re.compile(r"<execute>\s*\n?(.*?)\n?\s*</execute>", re.DOTALL)),
)
# The call a code step is stored as when its code called no tool or agent: smolagents' own name for it.
CODE_TOOL = "python_interpreter"
# How frameworks name the span of an agent's run, when it records no agent name: the name is group 1.
AGENT_RUN_SPANS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("smolagents", re.compile(r"(.+)\.run")),  # "file_agent.run"
)
# Where frameworks record the tools a request declares, beyond the conventions' own attributes:
# (framework, attribute holding JSON, key of the list in it).
DECLARED_TOOLS: tuple[tuple[str, str, str], ...] = (
    ("pydantic-ai", "model_request_parameters", "function_tools"),
    ("langchain", "llm.invocation_parameters", "tools"),
)


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if isinstance(value, list) and value and part.lstrip("-").isdigit():
            value = value[int(part)] if -len(value) <= int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def unwrap(value: Any, wrappers: tuple[Unwrap, ...], names: Sequence[str] = ()) -> Any:
    """``value`` without the first framework wrapper it matches (as it is when it matches none).
    Arguments passed by position are kept: under their parameter's name when ``names`` (the tool's
    parameters, in order) gives it, else in a list under the wrapper's own key."""
    if not isinstance(value, dict):
        return value
    for w in wrappers:
        if w.keys <= value.keys():
            inner = _at(value, w.path)
            if inner is None:
                continue
            given = value.get(w.positional) if w.positional else None
            if not given or not isinstance(given, list) or not isinstance(inner, dict):
                return inner
            named = dict(zip(names, given))
            rest = given[len(named):]
            return {**named, **({w.positional: rest} if rest else {}), **inner}
    return value


def final_answer(name: str, arguments: Any) -> tuple[bool, Any]:
    """(True, the answer) when ``name`` is a framework's final-answer tool; (False, None) otherwise."""
    if name not in FINAL_ANSWER_TOOLS:
        return False, None
    key = FINAL_ANSWER_TOOLS[name]
    if key is None or not isinstance(arguments, dict):
        return True, arguments
    return True, arguments.get(key)


def agent_called(span_name: str, attributes: Mapping[str, Any], name_keys: Sequence[str]) -> str:
    """The name an agent is called by: its recorded name, else its run span's name without a framework's
    suffix (``AGENT_RUN_SPANS``), else the span's name."""
    for key in name_keys:
        if isinstance(attributes.get(key), str) and attributes[key]:
            return str(attributes[key])
    for _, pattern in AGENT_RUN_SPANS:
        found = pattern.fullmatch(span_name)
        if found:
            return found.group(1)
    return span_name


def is_unknown_tool(text: str | None, name: str) -> bool:
    """True when ``text`` (a tool result or an error) says that the tool ``name`` does not exist."""
    if not text:
        return False
    for _, pattern in UNKNOWN_TOOL_EVIDENCE:
        for match in pattern.finditer(text):
            if match.group(1).strip("'\"") == name:
                return True
    return False


def is_envelope(span_name: str) -> bool:
    return span_name in ENVELOPE_AGENTS


def is_graph_node(metadata: Any) -> bool:
    return isinstance(metadata, dict) and GRAPH_NODE_KEY in metadata


def declared_in(a: Mapping[str, Any], loads: Any) -> Any:
    """The first framework-specific declared-tools list found in attributes ``a``, or None."""
    for _, attribute, key in DECLARED_TOOLS:
        value = loads(a.get(attribute))
        if isinstance(value, dict) and isinstance(value.get(key), list):
            return value[key]
    return None
