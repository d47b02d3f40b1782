"""Instrumenting the ``openai`` client: Chat Completions and Responses, sync, async and streamed.

``OpenAIInstrumentor(tracing, agent=..., guard=...)`` is the Anthropic instrumentor's recording core
(``client.py``) with OpenAI's dialect: requests and responses of both APIs read as plain data, and the
four ``create`` methods patched. Most agent frameworks (the OpenAI Agents SDK, LangGraph's
``ChatOpenAI``, smolagents' ``OpenAIServerModel``, pydantic-ai) call one of them underneath, so one line
traces and guards them. A tool call is a ``tool_calls`` entry (Chat) or a ``function_call`` output item
(Responses); its observation is the ``tool`` message or ``function_call_output`` item the next request
carries. Requests chained by ``previous_response_id`` instead of resent history are each a run of their
own (the history is on OpenAI's side, not in the request).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..records.text import to_json
from .client import Accumulator, ClientInstrumentor, Done
from .inflight import retry_patches

__all__ = ["OpenAIInstrumentor", "OpenAIDialect"]

_SENTINELS = frozenset({"NotGiven", "Omit"})  # the SDK's "argument not passed" markers


def _items(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return [v.model_dump(mode="json", exclude_none=True) if hasattr(v, "model_dump") else v for v in value or []]


def _text_of(content: Any) -> str:
    """Text of a message's content: a string, or parts of type text / input_text / output_text."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(str(p.get("text") or "") for p in content
                         if isinstance(p, Mapping) and p.get("type") in ("text", "input_text", "output_text"))
    return "" if content is None else to_json(content)


def _args(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


class OpenAIDialect:
    """Chat Completions and Responses requests and responses, told apart by their keys."""

    provider = "openai"

    def request(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in kwargs.items() if type(v).__name__ not in _SENTINELS}
        # The Responses conversation is a parameter, not ``messages``: a copy, so an agent that appends
        # to its list in place does not change the request already recorded (records/requests.py
        # compares parameters with the last call's to redact them once).
        if isinstance(out.get("input"), list):
            out["input"] = list(out["input"])
        return out

    def messages(self, request: dict[str, Any]) -> list[Any]:
        if "messages" in request:
            return _items(request.get("messages"))
        return _items(request.get("input"))

    def declared(self, request: dict[str, Any]) -> frozenset[str] | None:
        tools = request.get("tools")
        if not isinstance(tools, (list, tuple)):
            return None
        names = set()
        for t in tools:
            t = t.model_dump() if hasattr(t, "model_dump") else t
            if isinstance(t, Mapping):
                fn = t.get("function") if isinstance(t.get("function"), Mapping) else t
                if fn.get("name"):
                    names.add(str(fn["name"]))
        return frozenset(names)

    def plain(self, response: Any) -> dict[str, Any]:
        if not hasattr(response, "model_dump") and hasattr(response, "parse"):  # .with_raw_response
            response = response.parse()
        return response.model_dump(mode="json") if hasattr(response, "model_dump") else dict(response)

    def text(self, response: dict[str, Any]) -> str:
        if "choices" in response:
            message = (response.get("choices") or [{}])[0].get("message") or {}
            return _text_of(message.get("content")).strip()
        return "\n".join(_text_of(o.get("content")) for o in response.get("output") or []
                         if o.get("type") == "message").strip()

    def tool_uses(self, response: dict[str, Any]) -> list[tuple[str, str, Any]]:
        if "choices" in response:
            message = (response.get("choices") or [{}])[0].get("message") or {}
            return [(str(c.get("id") or ""), str((c.get("function") or {}).get("name")),
                     _args((c.get("function") or {}).get("arguments"))) for c in message.get("tool_calls") or []]
        return [(str(o.get("call_id") or o.get("id") or ""), str(o.get("name")), _args(o.get("arguments")))
                for o in response.get("output") or [] if o.get("type") == "function_call"]

    def results(self, use_ids: list[str], messages: Sequence[Any]) -> list[tuple[str, str, bool]]:
        found: dict[str, str] = {}
        ordered: list[tuple[str, str]] = []
        for m in messages:
            if not isinstance(m, Mapping):
                continue
            if m.get("role") == "tool":
                key, text = str(m.get("tool_call_id") or ""), _text_of(m.get("content"))
            elif m.get("type") == "function_call_output":
                output = m.get("output")
                key, text = str(m.get("call_id") or ""), output if isinstance(output, str) else _text_of(output)
            else:
                continue
            ordered.append((key, text))
            found.setdefault(key, text)
        out = []
        for position, use_id in enumerate(use_ids):
            if use_id in found:
                out.append((use_id, found[use_id], False))
            elif position < len(ordered):
                out.append((use_id or ordered[position][0], ordered[position][1], False))
            else:
                out.append((use_id, "", False))
        return out

    def first_user_text(self, messages: Sequence[Any]) -> str | None:
        for m in messages:
            if isinstance(m, Mapping) and m.get("role") == "user":
                return _text_of(m.get("content")).strip() or None
        return None

    def truncated(self, response: dict[str, Any]) -> bool:
        if "choices" in response:
            return (response.get("choices") or [{}])[0].get("finish_reason") == "length"
        return response.get("status") == "incomplete"


class OpenAIInstrumentor(ClientInstrumentor):
    """``OpenAIInstrumentor(tracing, agent=..., guard=...).instrument()``; ``uninstrument()`` restores the
    client. ``agent`` names the runs it makes (default ``openai-client``)."""

    dialect = OpenAIDialect()
    default_agent = "openai-client"

    def _patches(self) -> list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
        from openai.resources.chat.completions import AsyncCompletions, Completions
        from openai._base_client import AsyncAPIClient, SyncAPIClient
        from openai.resources.responses import AsyncResponses, Responses

        return [(Completions, "create", lambda o: self.wrap(o, _ChatChunks)),
                (AsyncCompletions, "create", lambda o: self.wrap_async(o, _ChatChunks)),
                (Responses, "create", lambda o: self.wrap(o, _ResponseEvents)),
                (AsyncResponses, "create", lambda o: self.wrap_async(o, _ResponseEvents))
                ] + retry_patches(SyncAPIClient, AsyncAPIClient)  # the SDK's retries, counted on the call


class _ChatChunks(Accumulator):
    """``chat.completion.chunk`` events folded into the ``chat.completion`` they make up."""

    def __init__(self, done: Done) -> None:
        super().__init__(done)
        self._content: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}

    def add(self, event: Any) -> None:
        chunk = event.model_dump(mode="json") if hasattr(event, "model_dump") else dict(event)
        if self.snapshot is None:
            self.snapshot = {"id": chunk.get("id"), "object": "chat.completion", "created": chunk.get("created"),
                             "model": chunk.get("model"), "choices": [{"index": 0, "finish_reason": None,
                                                                         "message": {"role": "assistant"}}]}
        if chunk.get("usage"):
            self.snapshot["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self._content.append(delta["content"])
            for call in delta.get("tool_calls") or []:
                slot = self._calls.setdefault(call.get("index", 0), {"id": None, "type": "function",
                                                                    "function": {"name": "", "arguments": ""}})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                self.snapshot["choices"][0]["finish_reason"] = choice["finish_reason"]
        message = self.snapshot["choices"][0]["message"]
        message["content"] = "".join(self._content) or None
        if self._calls:
            message["tool_calls"] = [self._calls[i] for i in sorted(self._calls)]


class _ResponseEvents(Accumulator):
    """A Responses stream: its closing event carries the whole response."""

    def add(self, event: Any) -> None:
        if getattr(event, "type", None) in ("response.completed", "response.incomplete", "response.failed"):
            self.snapshot = event.response
