"""Message text and sizes, shared by the chat-shaped formats.

Sources write a message's ``content`` as a string, a list of parts (``{"type": "text", "text": ...}``)
or not at all; sizes feed ``estimate_tokens`` when a source records no per-step token counts.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import TrajectoryFormatError

__all__ = [
    "RUN_STATUSES",
    "TASK_CHARS",
    "as_dict",
    "as_list",
    "clip",
    "content_text",
    "first_user_text",
    "message_chars",
    "task_text",
]

# The run statuses of docs/schema.md: a source that names one of these keeps it.
RUN_STATUSES = frozenset({
    "ok", "max_iters", "budget_exceeded", "stagnated", "tool_error", "context_overflow", "error",
    "interrupted", "incomplete",
})
TASK_CHARS = 2_000  # a run's task is clipped to this: enough to recognise it, small enough to list
# SWE-bench prompts (SWE-agent 1.x, mini-swe-agent) wrap the issue in instructions; the issue is the task.
_PR_DESCRIPTION = re.compile(
    r"<pr_description>\s*(?:Consider the following PR description:\s*)?(.*?)</pr_description>", re.DOTALL
)


def decode_document(raw: bytes, max_bytes: int) -> str:
    """A file's bytes (read up to ``max_bytes + 1``) as text, or the reason it is not importable."""
    if len(raw) > max_bytes:
        raise TrajectoryFormatError(f"larger than {max_bytes >> 20} MiB")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise TrajectoryFormatError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from exc


def content_text(content: Any) -> str:
    """The text of a message's ``content`` whatever its shape."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                text = part.get("text", part.get("content"))
                parts.append(text if isinstance(text, str) else content_text(text) if isinstance(text, list)
                             else "")
        return "\n".join(p for p in parts if p)
    if isinstance(content, dict):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    return str(content)


def message_chars(message: Any) -> int:
    """Characters a message adds to a prompt: its text plus any tool calls it makes."""
    if not isinstance(message, dict):
        return 0
    n = len(content_text(message.get("content")))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                n += len(str(fn.get("name") or "")) + len(str(fn.get("arguments") or ""))
    return n


def clip(text: str | None, limit: int = TASK_CHARS) -> str | None:
    if not text:
        return None
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def as_dict(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is an object (``None`` counts as empty), else a wrong-structure error."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TrajectoryFormatError(f"wrong structure: {what} is {_kind(value)}, expected an object")
    return value


def as_list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise TrajectoryFormatError(f"wrong structure: {what} is {_kind(value)}, expected a list")
    return value


def first_user_text(messages: list[Any], *, skip_demos: bool = False) -> str | None:
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "user" and not (skip_demos and m.get("is_demo")):
            return content_text(m.get("content"))
    return None


def task_text(prompt: str | None) -> str | None:
    """The task inside a first user message: the ``<pr_description>`` when there is one, else all of it."""
    if prompt and (m := _PR_DESCRIPTION.search(prompt)):
        return m.group(1)
    return prompt


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
