"""Plain chat transcripts: a list of ``{role, content, name?}``, bare or under ``messages``/``history``.

Without tool calls all we can recover is who spoke: each message by an agent (role ``assistant``, or
a ``name`` that is not the human's, as multi-agent logs write other agents' turns with role
``user``) is a step whose text is the thought.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .trajectory import ImportedStep, Trajectory, estimate_tokens
from .text import RUN_STATUSES, as_dict, clip, content_text, first_user_text, message_chars

__all__ = ["DEFAULT_AGENT", "is_message", "messages_of", "parse"]

DEFAULT_AGENT = "chat"
_HUMAN_NAMES = frozenset({"user", "human", "customer"})
_NOT_SPEAKERS = frozenset({"system", "tool", "function"})


def is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def messages_of(data: Any) -> list[Any] | None:
    """The message list a file holds, if it holds one."""
    if isinstance(data, dict):
        for key in ("messages", "history"):
            value = data.get(key)
            if isinstance(value, list):
                return value
        return None
    return data if isinstance(data, list) else None


def _speaker(m: dict[str, Any]) -> str | None:
    """The agent that wrote ``m`` ("" for an unnamed assistant), or None for the human or the system."""
    role = m.get("role")
    name = m.get("name") if isinstance(m.get("name"), str) else ""
    if role == "assistant":
        return name
    if role in _NOT_SPEAKERS or not name or name.lower() in _HUMAN_NAMES:
        return None
    return name


def parse(data: Any, path: Path) -> list[Trajectory]:
    messages = messages_of(data) or []
    meta = data if isinstance(data, dict) else {}
    steps: list[ImportedStep] = []
    speakers: Counter[str] = Counter()
    chars = 0
    for i, raw in enumerate(messages):
        m = as_dict(raw, f"message {i}")
        who = _speaker(m)
        if who is not None:
            if who:
                speakers[who] += 1
            steps.append(ImportedStep(step=len(steps) + 1, thought=content_text(m.get("content")) or None,
                                      context_tokens=estimate_tokens(chars)))
        chars += message_chars(m)
    status = meta["status"] if meta.get("status") in RUN_STATUSES else "ok"
    model, error = meta.get("model"), meta.get("error")
    attributes: dict[str, Any] = {"format": "chat"}
    if len(speakers) > 1:
        attributes["agents"] = sorted(speakers)
    return [Trajectory(
        source=str(path), agent=speakers.most_common(1)[0][0] if speakers else DEFAULT_AGENT, status=status,
        steps=steps, task=clip(first_user_text(messages)), model=model if isinstance(model, str) else None,
        error=error if isinstance(error, str) else None, attributes=attributes,
    )]
