"""A scripted Gemini API (``generateContent``, ``streamGenerateContent?alt=sse``) on 127.0.0.1.

For Google's Gemini CLI, which takes ``GOOGLE_GEMINI_BASE_URL`` (loopback allowed over http) with an
API key of any value. The script is the same ``Reply`` as the Responses server's: reasoning becomes a
``thought`` part, tool calls ``functionCall`` parts, content a text part, a status other than 200 an
error body.

The CLI also makes calls of its own that are not the agent's turn: routing a request to a model, and
checks that answer in JSON under a schema (``generationConfig.responseJsonSchema``). Those are
answered here, from the schema (the first enum value, 10 for numbers, false, empty lists), and never
reach the script: the script plays the agent's model only. ``requests`` logs every body.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from looptrace.tracer.loopback import LoopbackService, TrackedHandler

from .responses_server import Reply, ResponsesHandler

__all__ = ["GeminiServer", "declared_functions", "schema_value"]


def _tokens(value: Any) -> int:
    return len(json.dumps(value)) // 4 + 1


def declared_functions(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The function declarations of a request, by name."""
    return {f["name"]: f for t in request.get("tools") or [] if isinstance(t, dict)
            for f in t.get("functionDeclarations") or [] if isinstance(f, dict) and isinstance(f.get("name"), str)}


def schema_value(schema: dict[str, Any]) -> Any:
    """A value that satisfies ``schema`` (Gemini's OpenAPI subset): what the CLI's side calls get."""
    kind = str(schema.get("type", "")).upper()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "OBJECT":
        return {k: schema_value(v) for k, v in (schema.get("properties") or {}).items()}
    if kind in ("INTEGER", "NUMBER"):
        return 10
    if kind == "BOOLEAN":
        return False
    if kind == "ARRAY":
        return []
    return "scripted"


def _parts(reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        parts.append({"text": reply.reasoning, "thought": True})
    for call in reply.tool_calls:
        args = json.loads(call["arguments"]) if isinstance(call["arguments"], str) else call["arguments"]
        parts.append({"functionCall": {"name": call["name"], "args": args}})
    if reply.content is not None:
        parts.append({"text": reply.content})
    return parts


class GeminiServer(LoopbackService):
    """Serve ``handler`` as the Gemini API's ``models/*:generateContent`` and ``:streamGenerateContent``."""

    request_handler: type[BaseHTTPRequestHandler]  # set below, once _Handler is defined
    thread_name = "looptrace-gemini-server"

    def __init__(self, handler: ResponsesHandler, *, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self._handler = handler
        self._last: dict[str, list[Any]] = {}  # model -> the contents last sent to it (the prefix cache)

    @property
    def base_url(self) -> str:
        """What ``GOOGLE_GEMINI_BASE_URL`` takes (the client appends ``/v1beta/models/...``)."""
        return self.root_url

    def answer(self, model: str, body: Any) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            if not isinstance(body, dict):
                return 400, {"error": {"code": 400, "message": "request body must be a JSON object"}}
            config = body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            if schema:  # the CLI's own side call (routing, checks): not the agent's turn
                parts = [{"text": json.dumps(schema_value(schema))}]
            else:
                try:
                    reply = self._handler(body)
                except Exception as err:  # noqa: BLE001 - reported in the 500 body, where a failing test looks
                    return 500, {"error": {"code": 500, "message": f"script handler raised {err!r}"}}
                if reply.status != 200:
                    status = "INTERNAL" if reply.status >= 500 else "INVALID_ARGUMENT"
                    return reply.status, {"error": {"code": reply.status, "message": reply.error, "status": status}}
                parts = _parts(reply)
            contents = body.get("contents") if isinstance(body.get("contents"), list) else []
            before = self._last.get(model)
            self._last[model] = contents
            cached = _tokens(before) if before and contents[:len(before)] == before else 0
        thoughts = sum(_tokens(p["text"]) for p in parts if p.get("thought"))
        prompt, output = _tokens(contents), _tokens(parts)
        return 200, {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": prompt, "cachedContentTokenCount": cached,
                              "candidatesTokenCount": output, "thoughtsTokenCount": thoughts,
                              "totalTokenCount": prompt + output + thoughts},
            "modelVersion": model, "responseId": f"scripted-{len(self.requests)}",
        }


class _Handler(TrackedHandler):

    def do_GET(self) -> None:
        self.send_json(404, {"error": {"code": 404, "message": self.path}})

    def do_POST(self) -> None:
        body = self.read_json()
        path, _, query = self.path.partition("?")
        model, _, method = path.rpartition("/")[2].partition(":")
        if method == "countTokens":
            self.send_json(200, {"totalTokens": _tokens(body)})
            return
        if method not in ("generateContent", "streamGenerateContent"):
            self.send_json(404, {"error": {"code": 404, "message": self.path}})
            return
        status, payload = self.server.owner.answer(model, body)
        if status == 200 and method == "streamGenerateContent" and "alt=sse" in query:
            self.send(200, "text/event-stream", f"data: {json.dumps(payload)}\n\n".encode())
        else:
            self.send_json(status, payload)


GeminiServer.request_handler = _Handler
