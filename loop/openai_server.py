"""A scripted OpenAI Chat Completions API on 127.0.0.1, for offline tests of foreign agent frameworks.

Why a sibling of ``server.py`` rather than a mode of it: the Messages API and Chat Completions differ in
every body and path, and the frameworks under test (openai-agents, LangGraph, smolagents, pydantic-ai)
only need the non-streaming chat shape. The real ``openai`` SDK pointed at ``base_url`` exercises the
same request building and parsing a live run does; nothing here touches the network beyond loopback.

The script is a function from the request body to the assistant's message (``{"content": ...}`` and/or
``{"tool_calls": [{"id", "name", "arguments"}]}``; a missing id becomes ``call_...``), so the server holds no conversation state: a
framework that retries or re-sends a request gets the same answer.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from looptrace.tracer.loopback import LoopbackServer, TrackedHandler

__all__ = ["ChatHandler", "ChatCompletionsServer", "chat_completion"]

ChatHandler = Callable[[dict[str, Any]], dict[str, Any]]
_PATHS = ("/v1/chat/completions", "/chat/completions")


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


class ChatCompletionsServer:
    """Serve ``handler`` as ``POST /v1/chat/completions``. ``requests`` logs every request body, in order."""

    def __init__(self, handler: ChatHandler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._handler = handler
        self._address = (host, port)
        self._lock = threading.Lock()
        self._http: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[Any] = []

    @property
    def base_url(self) -> str:
        """The URL the ``openai`` SDK takes as ``base_url`` (it appends ``/chat/completions``)."""
        if self._http is None:
            raise RuntimeError("ChatCompletionsServer is not running; call start() first")
        return f"http://{self._address[0]}:{self._http.server_port}/v1"

    def start(self) -> Self:
        self._http = LoopbackServer(self._address, _Handler, owner=self)
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="looptrace-chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            if not isinstance(body, dict):
                return 400, {"error": {"message": "request body must be a JSON object", "type": "invalid_request"}}
            try:
                message = self._handler(body)
            except Exception as err:  # noqa: BLE001 - reported in the 500 body, where a failing test looks
                return 500, {"error": {"message": f"script handler raised {err!r}", "type": "server_error"}}
        return 200, chat_completion(message, body, f"chatcmpl-{n:08d}")


class _Handler(TrackedHandler):

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = None
        if self.path.partition("?")[0] not in _PATHS:
            status, payload = 404, {"error": {"message": f"Not found: {self.path}", "type": "not_found"}}
        else:
            status, payload = self.server.owner._answer(body)
        data = json.dumps(payload).encode()
        head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(data)}\r\n\r\n").encode()
        self.wfile.write(head + data)
