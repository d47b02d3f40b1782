"""A scripted OpenAI Responses API on 127.0.0.1, streaming as the Responses API streams (SSE).

Why beside ``openai_server.py`` rather than inside it: the Responses API has its own path
(``/v1/responses``), its own input (a list of typed items: messages, ``function_call``,
``function_call_output``, ``reasoning``) and answers a streaming client with server-sent events
(``response.created``, ``response.output_item.added``/``.done``, ``response.completed`` carrying the
usage). Coding-agent CLIs speak it (OpenAI's Codex CLI with ``wire_api = "responses"``), so their real
binaries can run offline against a script.

The script is a function from the request body to a ``Reply``: reasoning summary text, tool calls
(``{"name", "arguments"}``, arguments a JSON string or a value to encode), a message, or an HTTP
``status`` other than 200 with an error message (a model call that fails). The server keeps no
conversation of its own; the one thing it remembers is what it was sent, to count cached input the
way prompt caching does (below).

Usage is estimated, 4 characters a token as the other scripted servers do, but every field is filled
so an importer can be checked on each: ``input_tokens`` (the whole input), ``cached_tokens`` (the
input of the last request with the same ``prompt_cache_key`` when this one starts with it: the
prefix a provider's cache would hold), ``output_tokens`` and, within them, ``reasoning_tokens`` (the
summary's size).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from looptrace.tracer.loopback import LoopbackService, TrackedHandler

__all__ = ["Reply", "ResponsesHandler", "ResponsesServer", "declared_tools", "response_events"]


@dataclass(frozen=True)
class Reply:
    """What the scripted model answers one request with."""

    reasoning: str | None = None  # a reasoning item's summary text
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # [{"name", "arguments"}]
    content: str | None = None  # the assistant's message
    status: int = 200  # not 200: the call fails with this HTTP status and ``error``
    error: str = "scripted failure"


ResponsesHandler = Callable[[dict[str, Any]], Reply]
_PATHS = ("/v1/responses", "/responses")


def _tokens(value: Any) -> int:
    return len(json.dumps(value)) // 4 + 1


def declared_tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The function tools a request declares, by name (namespaces and built-ins such as ``web_search``
    are not functions a script can call by name)."""
    return {t["name"]: t for t in request.get("tools") or []
            if isinstance(t, dict) and t.get("type") == "function" and isinstance(t.get("name"), str)}


def _items(reply: Reply, n: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        items.append({"type": "reasoning", "id": f"rs_{n:06d}", "encrypted_content": None,
                      "summary": [{"type": "summary_text", "text": reply.reasoning}]})
    for i, call in enumerate(reply.tool_calls):
        arguments = call["arguments"] if isinstance(call["arguments"], str) else json.dumps(call["arguments"])
        items.append({"type": "function_call", "id": f"fc_{n:06d}_{i}", "name": call["name"],
                      "call_id": call.get("id") or f"call_{n:06d}_{i}", "arguments": arguments, "status": "completed"})
    if reply.content is not None:
        items.append({"type": "message", "id": f"msg_{n:06d}", "role": "assistant", "status": "completed",
                      "content": [{"type": "output_text", "text": reply.content, "annotations": []}]})
    return items


def response_events(reply: Reply, request: dict[str, Any], n: int, cached: int) -> list[dict[str, Any]]:
    """The server-sent events of response number ``n`` answering ``request`` with ``reply``."""
    rid = f"resp_{n:06d}"
    items = _items(reply, n)
    reasoning = _tokens(reply.reasoning) if reply.reasoning is not None else 0
    inputs = _tokens(request.get("input", []))
    usage = {"input_tokens": inputs, "input_tokens_details": {"cached_tokens": min(cached, inputs)},
             "output_tokens": _tokens(items) + reasoning, "output_tokens_details": {"reasoning_tokens": reasoning}}
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    shell = {"id": rid, "object": "response", "created_at": 1_700_000_000, "model": request.get("model", "unknown"),
             "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": shell},
                                    {"type": "response.in_progress", "response": shell}]
    for index, item in enumerate(items):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        if item["type"] == "message":
            events.append({"type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                           "content_index": 0, "delta": item["content"][0]["text"]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    done = {**shell, "status": "completed", "output": items, "usage": usage}
    events.append({"type": "response.completed", "response": done})
    return events


class ResponsesServer(LoopbackService):
    """Serve ``handler`` as ``POST /v1/responses``. ``requests`` logs every request body, in order."""

    request_handler: type[BaseHTTPRequestHandler]  # set below, once _Handler is defined
    thread_name = "looptrace-responses-server"

    def __init__(self, handler: ResponsesHandler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self._handler = handler
        self._last_input: dict[str, list[Any]] = {}  # prompt_cache_key -> the input last sent with it

    @property
    def base_url(self) -> str:
        """The provider base URL a client appends ``/responses`` to."""
        return f"{self.root_url}/v1"

    def _cached(self, body: dict[str, Any]) -> int:
        inputs = body.get("input") if isinstance(body.get("input"), list) else []
        key = str(body.get("prompt_cache_key"))
        before = self._last_input.get(key)
        self._last_input[key] = inputs
        return _tokens(before) if before and inputs[:len(before)] == before else 0

    def _answer(self, body: Any) -> tuple[int, dict[str, Any] | list[dict[str, Any]]]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            if not isinstance(body, dict):
                return 400, {"error": {"message": "request body must be a JSON object", "type": "invalid_request"}}
            try:
                reply = self._handler(body)
            except Exception as err:  # noqa: BLE001 - reported in the 500 body, where a failing test looks
                return 500, {"error": {"message": f"script handler raised {err!r}", "type": "server_error"}}
            if reply.status != 200:
                kind = "server_error" if reply.status >= 500 else "invalid_request_error"
                return reply.status, {"error": {"message": reply.error, "type": kind, "code": None}}
            return 200, response_events(reply, body, n, self._cached(body))


class _Handler(TrackedHandler):

    def do_GET(self) -> None:
        # Clients may list models first; an empty list says "nothing to choose from", not an error.
        if self.path.partition("?")[0] in ("/v1/models", "/models"):
            self.send_json(200, {"object": "list", "data": []})
        else:
            self.send_json(404, {"error": {"message": f"Not found: {self.path}"}})

    def do_POST(self) -> None:
        body = self.read_json()
        if self.path.partition("?")[0] not in _PATHS:
            self.send_json(404, {"error": {"message": f"Not found: {self.path}"}})
            return
        status, payload = self.server.owner._answer(body)
        if status != 200 or not isinstance(payload, list):
            self.send_json(status, payload)
            return
        stream = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in payload).encode()
        self.send(200, "text/event-stream", stream)


ResponsesServer.request_handler = _Handler
