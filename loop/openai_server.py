"""A scripted OpenAI Chat Completions API on 127.0.0.1, for offline tests of foreign agent frameworks.

Why a sibling of ``server.py`` rather than a mode of it: the Messages API and Chat Completions differ in
every body and path, and the frameworks under test (openai-agents, LangGraph, smolagents, pydantic-ai)
only need the non-streaming chat shape. The real ``openai`` SDK pointed at ``base_url`` exercises the
same request building and parsing a live run does; nothing here touches the network beyond loopback.

It also answers ``stream: true`` (``chat.completion.chunk`` events) and the Responses API
(``POST /v1/responses``, plain or streamed), from the same script: the instrumentor tests drive every
shape the ``openai`` SDK sends.

A script may also answer with a whole body (``choices`` or ``object: response``), served as it is, or
with ``{"status": 400, "error": {...}}``: ``looptrace serve`` plays an OpenAI-client recording this way.

The script is a function from the request body to the assistant's message (``{"content": ...}`` and/or
``{"tool_calls": [{"id", "name", "arguments"}]}``; a missing id becomes ``call_...``), so the server holds no conversation state: a
framework that retries or re-sends a request gets the same answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from looptrace.tracer.loopback import LoopbackService, TrackedHandler

__all__ = ["ChatHandler", "ChatCompletionsServer", "chat_completion", "response_body", "chat_chunks",
           "response_events"]

ChatHandler = Callable[[dict[str, Any]], dict[str, Any]]
_PATHS = ("/v1/chat/completions", "/chat/completions")
_RESPONSES = ("/v1/responses", "/responses")


def chat_completion(message: dict[str, Any], request: dict[str, Any], completion_id: str) -> dict[str, Any]:
    """The ``chat.completion`` body for the scripted ``message`` answering ``request``."""
    # A script may leave ids out; agents join tool results to calls by id, so each gets a real-shaped one.
    calls = [{"id": c.get("id") or "call_" + hashlib.sha256(f"{completion_id}/{i}".encode()).hexdigest()[:24],
              "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
             for i, c in enumerate(message.get("tool_calls", ()))]
    reply: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if calls:
        reply["tool_calls"] = calls
    prompt = len(json.dumps(request.get("messages", []))) // 4 + 1  # an estimate, as the Messages server's
    completion = len(json.dumps(reply)) // 4 + 1
    return {
        "id": completion_id, "object": "chat.completion", "created": 1_700_000_000,
        "model": request.get("model", "unknown"),
        "choices": [{"index": 0, "message": reply, "logprobs": None,
                     "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def response_body(message: dict[str, Any], request: dict[str, Any], response_id: str) -> dict[str, Any]:
    """The Responses API body for the scripted ``message`` answering ``request``."""
    completion = chat_completion(message, {"messages": request.get("input"), "model": request.get("model")},
                                 response_id)
    reply = completion["choices"][0]["message"]
    output: list[dict[str, Any]] = []
    if reply.get("content"):
        output.append({"type": "message", "id": f"msg_{response_id}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": reply["content"], "annotations": []}]})
    for call in reply.get("tool_calls", ()):
        output.append({"type": "function_call", "id": f"fc_{call['id']}", "call_id": call["id"], "status": "completed",
                       "name": call["function"]["name"], "arguments": call["function"]["arguments"]})
    usage = completion["usage"]
    return {"id": response_id, "object": "response", "created_at": 1_700_000_000, "status": "completed",
            "model": request.get("model", "unknown"), "output": output, "parallel_tool_calls": True,
            "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                      "total_tokens": usage["total_tokens"], "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def chat_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``chat.completion`` as the ``chat.completion.chunk`` events a stream sends (usage in the last)."""
    head = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = completion["choices"][0]
    message = choice["message"]
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    text = message.get("content") or ""
    for i in range(0, len(text), 8):
        chunks.append({**head, "choices": [{"index": 0, "delta": {"content": text[i:i + 8]}, "finish_reason": None}]})
    for n, call in enumerate(message.get("tool_calls", ())):
        args = call["function"]["arguments"]
        chunks.append({**head, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
            {"index": n, "id": call["id"], "type": "function", "function": {"name": call["function"]["name"],
                                                                            "arguments": args[:5]}}]}}]})
        chunks.append({**head, "choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
            {"index": n, "function": {"arguments": args[5:]}}]}}]})
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    if completion.get("usage"):
        chunks.append({**head, "choices": [], "usage": completion["usage"]})
    return chunks


def response_events(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Responses body as the events of its stream (created, then completed with the whole response)."""
    created = {**body, "status": "in_progress", "output": []}
    return [{"type": "response.created", "sequence_number": 0, "response": created},
            {"type": "response.completed", "sequence_number": 1, "response": body}]


class ChatCompletionsServer(LoopbackService):
    """Serve ``handler`` as ``POST /v1/chat/completions``. ``requests`` logs every request body, in order."""

    request_handler: type[BaseHTTPRequestHandler]  # set below, once _Handler is defined
    thread_name = "looptrace-chat-server"

    def __init__(self, handler: ChatHandler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self._handler = handler

    @property
    def base_url(self) -> str:
        """The URL the ``openai`` SDK takes as ``base_url`` (it appends ``/chat/completions``)."""
        return f"{self.root_url}/v1"

    def _answer(self, body: Any, responses: bool = False) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            if not isinstance(body, dict):
                return 400, {"error": {"message": "request body must be a JSON object", "type": "invalid_request"}}
            try:
                message = self._handler(body)
            except Exception as err:  # noqa: BLE001 - reported in the 500 body, where a failing test looks
                return 500, {"error": {"message": f"script handler raised {err!r}", "type": "server_error"}}
        # A whole body (a recording served back by ``looptrace serve``) goes out as it is; so does an error.
        if "choices" in message or message.get("object") == "response":
            return 200, message
        if message.get("error"):
            return int(message.get("status") or 400), {"error": message["error"]}
        if responses:
            return 200, response_body(message, body, f"resp_{n:08d}")
        return 200, chat_completion(message, body, f"chatcmpl-{n:08d}")


class _Handler(TrackedHandler):

    def do_POST(self) -> None:
        body = self.read_json()
        path = self.path.partition("?")[0]
        if path not in _PATHS and path not in _RESPONSES:
            status, payload = 404, {"error": {"message": f"Not found: {self.path}", "type": "not_found"}}
        else:
            status, payload = self.server.owner._answer(body, responses=path in _RESPONSES)
        if status == 200 and isinstance(body, dict) and body.get("stream") is True:
            events = response_events(payload) if path in _RESPONSES else chat_chunks(payload)
            datas = [json.dumps(e) for e in events] + ([] if path in _RESPONSES else ["[DONE]"])
            self.send(200, "text/event-stream", b"".join(f"data: {d}\n\n".encode() for d in datas))
            return
        self.send_json(status, payload)


ChatCompletionsServer.request_handler = _Handler
