"""Context-bomb defences: trimming tool results, compacting old turns, a scratchpad.

Each is a small piece the loop calls at a fixed point, and each reports when it fires so the loop
can record it as an event on the step (``trim``, ``compaction``, ``scratchpad``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from looptrace.tracer.records.text import to_json

from .tools import Tool

__all__ = ["trim", "Trimmed", "compaction_cut", "summary_request", "compacted", "Scratchpad",
           "COMPACTION_SYSTEM"]


@dataclass(frozen=True)
class Trimmed:
    text: str
    cut_bytes: int  # 0 when nothing was cut


def trim(text: str, max_bytes: int | None) -> Trimmed:
    """Keep the head of ``text`` within ``max_bytes`` UTF-8 bytes, with a marker saying how much was cut."""
    data = text.encode("utf-8")
    if max_bytes is None or len(data) <= max_bytes:
        return Trimmed(text, 0)
    head = data[:max_bytes].decode("utf-8", "ignore")
    cut = len(data) - len(head.encode("utf-8"))
    return Trimmed(f"{head}\n[looptrace: trimmed {cut} of {len(data)} bytes; ask for a smaller part]", cut)


COMPACTION_SYSTEM = (
    "You compact an agent's working memory. Summarise the conversation so far for the agent itself: "
    "keep the task, the key facts learned, the files touched, decisions made, and the open questions. "
    "Be concise and factual."
)


def compaction_cut(messages: Sequence[Mapping[str, Any]], keep_recent_turns: int) -> int | None:
    """Index of the first message kept verbatim, or None if there is too little to compact.

    The cut falls on an assistant message so the kept tail stays a valid alternation (its
    tool_use/tool_result pairs intact) after the new first user message.
    """
    assistant_at = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if len(assistant_at) <= keep_recent_turns:
        return None
    cut = assistant_at[-keep_recent_turns] if keep_recent_turns else len(messages)
    return cut if cut > 1 else None


def _transcript(messages: Sequence[Mapping[str, Any]], max_result_chars: int = 2000) -> str:
    lines = []
    for m in messages:
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        for b in blocks:
            kind = b.get("type")
            if kind == "text":
                lines.append(f"{m.get('role')}: {b.get('text', '')}")
            elif kind == "tool_use":
                lines.append(f"{m.get('role')} called {b.get('name')} with {to_json(b.get('input'))}")
            elif kind == "tool_result":
                result = b.get("content")
                text = result if isinstance(result, str) else to_json(result)
                lines.append(f"tool result: {text[:max_result_chars]}")
    return "\n".join(lines)


def summary_request(messages: Sequence[Mapping[str, Any]], cut: int, model: str, max_tokens: int) -> dict[str, Any]:
    """The model call that summarises ``messages[:cut]``, as a plain-text transcript (no tool blocks)."""
    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": COMPACTION_SYSTEM,
        "messages": [{"role": "user", "content": f"<transcript>\n{_transcript(messages[:cut])}\n</transcript>\n\n"
                      "Summarise the transcript above as instructed."}],
    }


def compacted(messages: Sequence[Mapping[str, Any]], cut: int, task: str, summary: str) -> list[dict[str, Any]]:
    head = {"role": "user", "content": f"{task}\n\n[Summary of earlier turns, compacted by looptrace]\n{summary}"}
    return [head, *(dict(m) for m in messages[cut:])]


class Scratchpad:
    """A note the model keeps for itself; its latest content is injected into every system prompt."""

    def __init__(self) -> None:
        self.content = ""

    def tool(self) -> Tool:
        def write(content: str) -> str:
            self.content = content
            return f"scratchpad saved ({len(content)} characters); it is shown in your system prompt every turn"

        return Tool(
            "scratchpad",
            "Replace your scratchpad with `content`. Keep the plan, facts and progress you need later: "
            "old turns may be compacted, the scratchpad never is.",
            {"type": "object", "properties": {"content": {"type": "string"}}, "required": ["content"],
             "additionalProperties": False},
            write,
        )

    def system(self, base: str) -> str:
        if not self.content:
            return base
        return f"{base}\n\n<scratchpad>\n{self.content}\n</scratchpad>"
