"""What one model call said, read from its span in any convention: the model's tool calls, the tool
results its request carries, the tools it declared. Pure functions over attributes.

Why steps come from here: a step is a model turn, and the model's own messages are the one record every
instrumentor keeps (tool spans are optional, and frameworks wrap them). The request of call N+1 holds the
result of each tool call of call N, joined by tool-call id, in either the OpenAI shape (a ``tool`` message
with ``tool_call_id``) or the Anthropic one (a ``tool_result`` block with ``tool_use_id``), flattened by
OpenInference (``llm.input_messages.N.message.*``), written as GenAI JSON (``gen_ai.input.messages`` parts)
or only kept as the raw request and response JSON (``input.value`` / ``output.value``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...records.text import to_json
from .frameworks import declared_in
from .message_lists import _INPUT_PREFIXES, _TOOLS_PREFIXES, _flattened, _messages, _nested, _output_messages, _raw_io
from .values import _loads

__all__ = ["ToolCall", "Exchange", "exchange_of", "fill_outputs", "tool_calls_in", "tool_results_in", "declared_names"]

_RESPONSE_ID = ("gen_ai.response.id", "llm.response.id")


@dataclass(frozen=True)
class ToolCall:
    id: str | None
    name: str
    arguments: str | None  # the JSON text the model sent


@dataclass
class Exchange:
    """One model call: its request's messages, the model's tool calls and text, the declared tools."""

    messages: list[Any] | None
    output: list[Any] | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, str] = field(default_factory=dict)  # tool-call id -> result text, from the request
    declared: frozenset[str] | None = None  # None: the request's tools were not recorded
    response_id: str | None = None


def exchange_of(a: Mapping[str, Any]) -> Exchange:
    messages, _ = _messages(a, "gen_ai.input.messages", _INPUT_PREFIXES)
    output, _ = _output_messages(a)
    raw_messages, raw_output, raw_tools = _raw_io(a)
    messages = raw_messages if messages is None else messages
    output = raw_output if output is None else output
    tools = _loads(a.get("gen_ai.tool.definitions"))
    for prefix in _TOOLS_PREFIXES if tools is None and _flattened(a, _TOOLS_PREFIXES) else ():
        tools, _ = _nested(a, prefix)
        if tools is not None:
            break
    if tools is None:
        tools = raw_tools
    if tools is None:
        tools = declared_in(a, _loads)
    response_id = next((str(a[k]) for k in _RESPONSE_ID if a.get(k)), None)
    response = _loads(a.get("output.value"))
    if response_id is None and isinstance(response, dict) and isinstance(response.get("id"), str):
        response_id = response["id"]
    return Exchange(messages, output, tool_calls_in(output or ()), tool_results_in(messages or ()),
                    declared_names(tools), response_id)


def _arguments(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else to_json(value)


def _call(item: Any) -> ToolCall | None:
    """A tool call in any of its shapes: OpenAI (``function``), OpenInference (``tool_call.function``),
    OpenLLMetry (flat ``name``/``arguments``), GenAI parts (``type: tool_call``), Anthropic ``tool_use``."""
    if not isinstance(item, dict):
        return None
    item = item.get("tool_call", item)
    function = item.get("function") if isinstance(item.get("function"), dict) else {}
    name = function.get("name") or item.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = function.get("arguments", item.get("arguments", item.get("input")))
    ident = item.get("id")
    return ToolCall(str(ident) if ident is not None else None, name, _arguments(args))


def _blocks(m: Mapping[str, Any]) -> list[Any]:
    """A message's content blocks: GenAI ``parts``, OpenInference ``contents``, Anthropic ``content``."""
    out: list[Any] = []
    for key in ("parts", "contents", "content"):
        value = m.get(key)
        if isinstance(value, str) and value.startswith("["):
            value = _loads(value)  # OpenLLMetry writes Anthropic content lists as JSON text
        if isinstance(value, list):
            out.extend(b.get("message_content", b) if isinstance(b, dict) else b for b in value)
    return out


def tool_calls_in(messages: Sequence[Any]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        items = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
        items += [b for b in _blocks(m) if isinstance(b, dict) and b.get("type") in ("tool_call", "tool_use")]
        calls.extend(c for c in map(_call, items) if c is not None)
    return calls


def _text_of(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", b.get("content")) if isinstance(b, dict) else b for b in content]
        return "\n".join(str(t) for t in texts if t is not None)
    return to_json(content)


def tool_results_in(messages: Sequence[Any]) -> dict[str, str]:
    """Tool-call id -> the result text, for every tool result the request carries."""
    results: dict[str, str] = {}
    for m in messages:
        if not isinstance(m, dict):
            continue
        ident = m.get("tool_call_id")
        if ident is not None and m.get("role") == "tool":
            results[str(ident)] = _text_of(m.get("content")) or ""
        for b in _blocks(m):
            if not isinstance(b, dict):
                continue
            if b.get("type") == "tool_call_response" and b.get("id") is not None:
                results[str(b["id"])] = _text_of(b.get("response", b.get("result"))) or ""
            elif b.get("type") == "tool_result" and b.get("tool_use_id") is not None:
                results[str(b["tool_use_id"])] = _text_of(b.get("content")) or ""
    return results


def declared_names(tools: Any) -> frozenset[str] | None:
    """The names of the tools a request declares, in any convention's shape; None if not recorded."""
    tools = _loads(tools)
    if not isinstance(tools, list):
        return None
    names = set()
    for t in tools:
        t = _loads(t.get("tool", t)) if isinstance(t, dict) else t
        if isinstance(t, dict) and "json_schema" in t:  # OpenInference: llm.tools.N.tool.json_schema
            t = _loads(t["json_schema"])
        if not isinstance(t, dict):
            continue
        function = t.get("function") if isinstance(t.get("function"), dict) else {}
        name = function.get("name") or t.get("name")
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


def fill_outputs(exchanges: Sequence[Exchange]) -> bool:
    """Fill in responses that were not recorded from the next request's history (the assistant messages
    it adds after the previous request's), as some instrumentors record requests only. True when every
    call's response is then known, the last one excepted: a run's last call is its answer, or it was cut."""
    for x, y in zip(exchanges, exchanges[1:]):
        if x.output is None and x.messages is not None and y.messages is not None \
                and len(y.messages) > len(x.messages):
            x.output = [m for m in y.messages[len(x.messages):] if isinstance(m, dict) and m.get("role") == "assistant"]
            x.tool_calls = tool_calls_in(x.output)
    return bool(exchanges) and all(x.output is not None for x in exchanges[:-1]) \
        and (exchanges[-1].output is not None or len(exchanges) > 1)
