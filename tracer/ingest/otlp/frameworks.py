"""What each agent framework adds around the model's own messages, as tables: the one place to teach
looptrace a new framework. tests/test_frameworks_table.py has a test per entry.

Frameworks wrap what the model sent and what a tool returned (smolagents records a tool's Python call,
LangGraph a serialised ToolMessage), add spans that are not agents (an "Agent workflow" envelope, graph
nodes of kind AGENT), end runs with a built-in tool (smolagents' ``final_answer``), and report a call to a
tool the agent lacks in their own words. The readers below turn each back into what the model saw.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Unwrap", "ARGUMENT_WRAPPERS", "RESULT_WRAPPERS", "FINAL_ANSWER_TOOLS", "ENVELOPE_AGENTS",
    "GRAPH_NODE_KEY", "UNKNOWN_TOOL_EVIDENCE", "DECLARED_TOOLS", "unwrap", "final_answer", "is_unknown_tool",
    "is_envelope", "is_graph_node", "declared_in",
]


@dataclass(frozen=True)
class Unwrap:
    """A framework's wrapper object: recognised by holding all of ``keys``; the value sits at ``path``."""

    framework: str
    keys: frozenset[str]
    path: tuple[str, ...]


# A tool span's input, when it is the framework's record of the Python call rather than the model's JSON.
ARGUMENT_WRAPPERS: tuple[Unwrap, ...] = (
    Unwrap("smolagents", frozenset({"args", "kwargs", "sanitize_inputs_outputs"}), ("kwargs",)),
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
    ("openai-agents", re.compile(r"Tool '?([^' ]+)'? not found")),
    ("langgraph", re.compile(r"Error: (\S+) is not a valid tool")),
    ("pydantic-ai", re.compile(r"Unknown tool name: '?([^'\s.]+)'?")),
    ("any", re.compile(r"[Uu]nknown tool:? '?([^'\s:,.]+)'?")),
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


def unwrap(value: Any, wrappers: tuple[Unwrap, ...]) -> Any:
    """``value`` without the first framework wrapper it matches (as it is when it matches none)."""
    if not isinstance(value, dict):
        return value
    for w in wrappers:
        if w.keys <= value.keys():
            inner = _at(value, w.path)
            if inner is not None:
                return inner
    return value


def final_answer(name: str, arguments: Any) -> tuple[bool, Any]:
    """(True, the answer) when ``name`` is a framework's final-answer tool; (False, None) otherwise."""
    if name not in FINAL_ANSWER_TOOLS:
        return False, None
    key = FINAL_ANSWER_TOOLS[name]
    if key is None or not isinstance(arguments, dict):
        return True, arguments
    return True, arguments.get(key)


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
