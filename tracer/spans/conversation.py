"""Reading an agent's turns out of Messages API requests and responses (pure functions).

An agent that looptrace did not write shows its loop only through its model calls: each response's
``tool_use`` blocks are its actions, and the ``tool_result`` blocks in its next request are their
observations. Calls belong to the same run when each request extends the previous one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..records.text import to_json

__all__ = ["blocks", "response_text", "tool_uses", "result_text", "first_user_text", "extends"]


def blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out = []
    for block in content or []:
        if hasattr(block, "model_dump"):
            block = block.model_dump(mode="json")
        if isinstance(block, Mapping):
            out.append(block)
    return out


def response_text(message: Mapping[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in blocks(message.get("content")) if b.get("type") == "text").strip()


def tool_uses(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [b for b in blocks(message.get("content")) if b.get("type") == "tool_use"]


def result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = blocks(content)
    if all(p.get("type") == "text" for p in parts):
        return "\n".join(p.get("text", "") for p in parts)
    return to_json(parts)


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in messages:
        if message.get("role") == "user":
            text = "\n".join(b.get("text", "") for b in blocks(message.get("content")) if b.get("type") == "text")
            return text.strip() or None
    return None


def extends(previous: Sequence[str], current: Sequence[str]) -> bool:
    """Whether a request with message hashes ``current`` continues one with ``previous``."""
    return 0 < len(previous) < len(current) and list(current[: len(previous)]) == list(previous)
