"""A model span's message lists, in whichever form its convention wrote them.

GenAI writes ``gen_ai.input.messages`` / ``gen_ai.output.messages`` as JSON; OpenInference and OpenLLMetry
flatten them into one attribute per field (``llm.input_messages.0.message.role``, ``gen_ai.prompt.0.role``);
some instrumentors keep only the raw request and response as JSON (``input.value`` / ``output.value``);
any-agent writes the model's output as ``gen_ai.output``. These readers give back plain message lists (and
the attribute keys they came from, so the mapping knows what it moved out of ``spans``), and the text of
a list. Pure functions over attributes; ``attributes.py`` and ``messages.py`` build on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...records.text import to_json
from .values import _loads

__all__: list[str] = []  # private to this package

# Flattened lists: OpenInference (llm.input_messages.0.message.role), OpenLLMetry (gen_ai.prompt.0.role).
_INPUT_PREFIXES = ("llm.input_messages", "gen_ai.prompt")
_OUTPUT_PREFIXES = ("llm.output_messages", "gen_ai.completion")
_TOOLS_PREFIXES = ("llm.tools", "llm.request.functions")


def _nested(a: Mapping[str, Any], prefix: str) -> tuple[Any, list[str]]:
    """The flattened attributes under ``prefix`` as nested data (numeric keys become lists), and the keys
    it holds. A key that clashes with another (``x`` and ``x.y``) is left out, so it stays in ``spans``."""
    head = prefix + "."
    keys = [k for k in a if k.startswith(head)]
    if not keys:  # the common case: the span does not use this flattened list
        return None, []
    root: dict[str, Any] = {}
    placed = []
    for key in sorted(keys):
        node: Any = root
        *path, leaf = key[len(head):].split(".")
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            if leaf not in node:
                node[leaf] = a[key]
                placed.append(key)
    return (_listify(root) if root else None), placed


def _flattened(a: Mapping[str, Any], prefixes: Sequence[str]) -> bool:
    """Whether any key of ``a`` is under one of ``prefixes`` (one pass, for the ``_nested`` lookups that
    most spans, which record no flattened list, would each make in vain)."""
    heads = _HEADS.get(prefixes)
    if heads is None:
        heads = _HEADS[prefixes] = tuple(p + "." for p in prefixes)
    for k in a:  # a loop, not any() over a generator: this runs several times a model span
        if k.startswith(heads):
            return True
    return False


_HEADS: dict[Sequence[str], tuple[str, ...]] = {}


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    items = {k: _listify(v) for k, v in node.items()}
    if items and all(k.isdigit() for k in items):
        return [items[k] for k in sorted(items, key=int)]
    return items


def _messages(a: Mapping[str, Any], key: str, prefixes: Sequence[str]) -> tuple[list[Any] | None, list[str]]:
    if a.get(key) is not None:
        value = _loads(a[key])
        return (value if isinstance(value, list) else [value]), [key]
    for prefix in prefixes if _flattened(a, prefixes) else ():
        items, keys = _nested(a, prefix)
        if isinstance(items, list):
            return [m.get("message", m) if isinstance(m, dict) else m for m in items], keys
    return None, []


def _output_messages(a: Mapping[str, Any]) -> tuple[list[Any] | None, list[str]]:
    """A model call's output messages: ``gen_ai.output.messages``, the flattened lists, else
    ``gen_ai.output`` (with ``gen_ai.output.type``): the model's text, or its tool calls as a JSON list of
    ``{"tool.name", "tool.args"}`` (any-agent)."""
    messages, keys = _messages(a, "gen_ai.output.messages", _OUTPUT_PREFIXES)
    if messages is not None or a.get("gen_ai.output") is None:
        return messages, keys
    raw = a["gen_ai.output"]
    value = _loads(raw) if a.get("gen_ai.output.type") != "text" else raw
    if isinstance(value, list) and value and all(isinstance(v, dict) and "tool.name" in v for v in value):
        calls = [{"name": v["tool.name"], "arguments": v.get("tool.args")} for v in value]
        return [{"role": "assistant", "tool_calls": calls}], ["gen_ai.output"]
    text = raw if isinstance(raw, str) else to_json(raw)
    return [{"role": "assistant", "content": text}], ["gen_ai.output"]


def _raw_io(a: Mapping[str, Any]) -> tuple[list[Any] | None, list[Any] | None, Any]:
    """(input messages, output messages, declared tools) from ``input.value`` / ``output.value`` when they
    hold the raw request and response as JSON (OpenInference's OpenAI and Anthropic instrumentors, and
    frameworks that record the model's message as it came)."""
    request, response = _loads(a.get("input.value")), _loads(a.get("output.value"))
    messages = tools = output = None
    if isinstance(request, dict):
        messages = request.get("messages") if isinstance(request.get("messages"), list) else None
        tools = request.get("tools")
    if isinstance(response, dict):
        if isinstance(response.get("choices"), list) and response["choices"]:  # OpenAI chat completion
            output = [ch.get("message", ch) for ch in response["choices"] if isinstance(ch, dict)]
        elif isinstance(response.get("content"), list):  # Anthropic message
            output = [{"role": "assistant", "content": response["content"]}]
        elif response.get("role") == "assistant":  # a bare message (smolagents)
            output = [response]
    elif isinstance(response, list) and all(isinstance(m, dict) and "role" in m for m in response) and response:
        output = response
    return messages, output, tools


def _message_text(messages: Sequence[Any] | None) -> str | None:
    """The text of output messages: GenAI text parts, OpenInference content(s), OpenLLMetry content."""
    texts: list[str] = []
    for m in messages or ():
        if not isinstance(m, dict):
            continue
        blocks = m.get("content") if isinstance(m.get("content"), list) else ()  # Anthropic content blocks
        for part in m.get("parts") or m.get("contents") or blocks:
            part = part.get("message_content", part) if isinstance(part, dict) else part
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("content", part.get("text", ""))))
        if isinstance(m.get("content"), str):
            texts.append(m["content"])
    return "\n".join(t for t in texts if t) or None


def _user_text(messages: Sequence[Any] | None) -> str | None:
    users = (m for m in messages or () if isinstance(m, dict) and m.get("role") == "user")
    return next((_message_text([m]) for m in users), None)
