"""What the scripted Messages API server answers, and how each answer looks on the wire.

A script is plain data: `Reply` for a model response, `Fault` for an HTTP error, `StreamError` for an
overload that arrives mid-stream, `Disconnect` for a dropped connection. The functions below turn a
`Reply` into the JSON body and SSE event sequence the real API produces (text arrives as several
`text_delta`s, tool input as `input_json_delta` fragments; other block types, such as thinking, are
sent whole in `content_block_start`). They are pure, with no sockets, so `loop/server.py` stays a thin
transport and replay can reuse them.

Token counts are estimates, not a tokenizer: ceil(characters / 4), where input characters are those of
the compact JSON of the request's `system`, `messages` and `tools`, and output characters are the text
of text blocks plus the compact JSON of tool inputs. Good enough for budgets and cost displays in tests;
record real usage in `Reply.usage` when it matters.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Disconnect",
    "Fault",
    "Handler",
    "Reply",
    "ScriptItem",
    "StreamError",
    "error_body",
    "estimate_input_tokens",
    "estimate_output_tokens",
    "message_body",
    "partial_stream_events",
    "stream_events",
]


@dataclass(frozen=True)
class Reply:
    """A normal Messages API response.

    `usage=None` estimates every count; a partial dict overrides only the keys it names.
    `model=None` echoes the request's model. `delay` sleeps before answering (slow models, timeouts).
    """

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    usage: dict[str, Any] | None = None
    model: str | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        # Fail when the script is written, not deep inside an SSE encoder on a server thread.
        for block in self.content:
            if not isinstance(block, dict) or "type" not in block:
                raise ValueError(f"every content block needs a 'type': {block!r}")


@dataclass(frozen=True)
class Fault:
    """An HTTP error response with an Anthropic-shaped body."""

    status: int
    error_type: str = "overloaded_error"
    message: str = "injected fault"
    retry_after: float | None = None


@dataclass(frozen=True)
class StreamError:
    """Overload mid-stream: some deltas, then an SSE `error` event. Outside a stream: `Fault(529)`."""

    after_text: str = "partial"


@dataclass(frozen=True)
class Disconnect:
    """Reset the TCP connection without writing a byte."""


ScriptItem = Reply | Fault | StreamError | Disconnect
Handler = Callable[[dict[str, Any]], ScriptItem]

_TEXT_CHUNKS = 3  # several deltas per block, so consumers that concatenate are really exercised


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _ceil_quarter(chars: int) -> int:
    return (chars + 3) // 4


def estimate_input_tokens(request: dict[str, Any]) -> int:
    """ceil(chars / 4) over the compact JSON of `system`, `messages` and `tools` (those present)."""
    return _ceil_quarter(
        sum(len(_compact(request[key])) for key in ("system", "messages", "tools") if key in request)
    )


def estimate_output_tokens(content: list[dict[str, Any]]) -> int:
    chars = 0
    for block in content:
        if block["type"] == "text":
            chars += len(block.get("text", ""))
        elif block["type"] == "tool_use":
            chars += len(_compact(block.get("input", {})))
        else:
            chars += len(_compact(block))
    return _ceil_quarter(chars)


def _with_id(block: dict[str, Any], message_id: str, index: int) -> dict[str, Any]:
    """A ``tool_use`` block with a real-shaped id: agents (and tracers) join results to calls by it."""
    out = dict(block)
    if out.get("type") == "tool_use" and not out.get("id"):
        out["id"] = "toolu_" + hashlib.sha256(f"{message_id}/{index}".encode()).hexdigest()[:24]
    return out


def message_body(reply: Reply, request: dict[str, Any], message_id: str) -> dict[str, Any]:
    """The non-streaming response body for `reply` answering `request`."""
    usage = {
        "input_tokens": estimate_input_tokens(request),
        "output_tokens": estimate_output_tokens(reply.content),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    usage.update(reply.usage or {})
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": reply.model or request.get("model", "unknown"),
        "content": [_with_id(block, message_id, i) for i, block in enumerate(reply.content)],
        "stop_reason": reply.stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def _chunks(text: str, n: int = _TEXT_CHUNKS) -> Iterator[str]:
    size = max(1, -(-len(text) // n))
    for start in range(0, len(text), size):
        yield text[start : start + size]


def _message_start(message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    # The real API reports a token or so of output at the start; the final count comes in message_delta.
    usage = {**message["usage"], "output_tokens": min(1, message["usage"].get("output_tokens", 0))}
    started = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    return "message_start", {"type": "message_start", "message": started}


def _block_events(index: int, block: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    def delta(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {"type": "content_block_delta", "index": index, "delta": payload}

    if block["type"] == "text":
        start: dict[str, Any] = {**block, "text": ""}
        deltas = [delta({"type": "text_delta", "text": part}) for part in _chunks(block.get("text", ""))]
    elif block["type"] == "tool_use":
        start = {**block, "input": {}}
        raw = _compact(block.get("input", {}))
        deltas = [delta({"type": "input_json_delta", "partial_json": part}) for part in _chunks(raw)]
    else:
        # Thinking, server tools, ...: sent whole; the SDK accumulator keeps the start block as is.
        start, deltas = dict(block), []
    yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
    yield from deltas
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def stream_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) that stream `message`, as built by `message_body`."""
    events = [_message_start(message), ("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def partial_stream_events(
    fault: StreamError, request: dict[str, Any], message_id: str, request_id: str
) -> list[tuple[str, dict[str, Any]]]:
    """Start a text block, send `fault.after_text`, then fail as the API does when it overloads mid-stream."""
    message = message_body(Reply([{"type": "text", "text": fault.after_text}]), request, message_id)
    events = [_message_start(message), ("ping", {"type": "ping"})]
    events.extend(
        event for event in _block_events(0, message["content"][0]) if event[0] != "content_block_stop"
    )
    events.append(("error", error_body("overloaded_error", "Overloaded", request_id)))
    return events


def error_body(error_type: str, message: str, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
