"""The bundled scripted model: deterministic replies served by ``MessagesServer``.

A ``Script`` answers each conversation from its own list of replies, in order. A conversation is
known by its task (the first user message, up to a compaction marker), so several runs, sub-agents
included, can share one server at once. A fault in the list answers one request and the retry gets
the next item, as with a flaky API. Compaction requests get a summary. Token usage is estimated by
the server from the request size, so context growth is realistic.
"""

from __future__ import annotations

import hashlib
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from looptrace.tracer.spans.conversation import first_user_text

from .defences import COMPACTION_SYSTEM
from .replies import Fault, Reply, ScriptItem

__all__ = ["Script", "say", "act", "acts", "finish", "SCRIPTED_MODEL"]

SCRIPTED_MODEL = "scripted"
_COMPACTED = "\n\n[Summary of earlier turns"


def _id(*parts: object) -> str:
    return "toolu_" + hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


def say(text: str, **usage: int) -> Reply:
    """A final text answer (``end_turn``)."""
    return Reply([{"type": "text", "text": text}], usage=usage or None)


def act(tool: str, args: Mapping[str, Any], thought: str | None = None, **usage: int) -> Reply:
    """One tool call, with an optional thought before it."""
    return acts([(tool, args)], thought, **usage)


def acts(calls: Sequence[tuple[str, Mapping[str, Any]]], thought: str | None = None, **usage: int) -> Reply:
    """Several tool calls in one response (run in parallel by the loop)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": thought}] if thought else []
    content += [{"type": "tool_use", "id": "", "name": t, "input": dict(a)} for t, a in calls]
    return Reply(content, stop_reason="tool_use", usage=usage or None)


def finish(answer: str, thought: str | None = None, **usage: int) -> Reply:
    return act("done", {"answer": answer}, thought, **usage)


class Script:
    """A callable handler for ``MessagesServer``: task -> the replies of that conversation."""

    def __init__(self, conversations: Mapping[str, Sequence[ScriptItem]],
                 summary: str = "Task, facts so far, files touched and open questions are noted above.") -> None:
        self.conversations = {k: list(v) for k, v in conversations.items()}
        self.summary = summary
        self._turns: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def key(self, body: Mapping[str, Any]) -> str | None:
        text = first_user_text(body.get("messages") or []) or ""
        text = text.split(_COMPACTED, 1)[0]
        return text if text in self.conversations else None

    def __call__(self, body: dict[str, Any]) -> ScriptItem:
        if str(body.get("system") or "").startswith(COMPACTION_SYSTEM):
            return say(self.summary)
        key = self.key(body)
        if key is None:
            return Fault(400, "invalid_request_error", "the scripted model has no conversation for this task")
        with self._lock:
            turn = self._turns[key]
            self._turns[key] += 1
        items = self.conversations[key]
        if turn >= len(items):
            return Fault(500, "api_error", f"script for {key[:60]!r} exhausted after {len(items)} replies")
        item = items[turn]
        if isinstance(item, Reply):
            content = [
                {**b, "id": _id(key, turn, i)} if b.get("type") == "tool_use" and not b.get("id") else b
                for i, b in enumerate(item.content)
            ]
            item = Reply(content, item.stop_reason, item.usage, item.model or SCRIPTED_MODEL, item.delay)
        return item
