"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is an entry: ``user`` and ``assistant`` entries carry an Anthropic ``message``; others
(``summary``, ``system``, ``file-history-snapshot``) are bookkeeping. Claude Code writes one line
per content block, so the lines of one API response share ``message.id`` (and repeat its
``usage``): one response is one step and one LLM call; its ``tool_use`` blocks are the step's calls,
answered by ``tool_result`` blocks in later user entries (matched on ``tool_use_id``, ``is_error``
kept). Entries with ``isSidechain`` are a subagent's (the Task tool): they form a sub-run per
``agentId`` whose parent is the session. Claude Code records no end status: a session whose last
response ended its turn (``end_turn``) is ``ok``, an API error entry makes it ``error``, a user
interruption ``interrupted``, and anything else ``incomplete``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .text import as_dict, clip, content_text
from .trajectory import ImportedLLMCall, ImportedStep, Trajectory
from .values import iso_time, whole

__all__ = ["AGENT", "is_transcript", "parse_entries"]

AGENT = "claude-code"
_CONVERSATION = frozenset({"user", "assistant"})
_INTERRUPTED = "[Request interrupted by user"


def is_transcript(entries: list[Any]) -> bool:
    """Lines that look like Claude Code entries: every one typed (newer versions add types of their
    own, which are skipped), and user/assistant ones carrying a message and a session."""
    head = [e for e in entries[:20] if isinstance(e, dict) and isinstance(e.get("type"), str)]
    return bool(head) and len(head) == len(entries[:20]) and any(
        e["type"] in _CONVERSATION and isinstance(e.get("message"), dict) and "sessionId" in e for e in head)


class _Run:
    def __init__(self) -> None:
        self.steps: list[ImportedStep] = []
        self.calls: list[ImportedLLMCall] = []
        self.by_message: dict[str, int] = {}  # message id -> step
        self.pending: dict[str, ImportedStep] = {}  # tool_use id -> call
        self.times: list[Any] = []
        self.task: str | None = None
        self.model: str | None = None
        self.last_stop: str | None = None
        self.error: str | None = None
        self.interrupted = False

    def assistant(self, entry: dict[str, Any], message: dict[str, Any], when: Any) -> None:
        if entry.get("isApiErrorMessage"):
            self.error = content_text(message.get("content")) or "API error"
            return
        mid = str(message.get("id") or entry.get("uuid"))
        model = message.get("model")
        if isinstance(model, str) and not model.startswith("<"):  # "<synthetic>" marks Claude Code's own text
            self.model = model
        step = self.by_message.get(mid)
        if step is None:
            step = self.by_message[mid] = len(self.by_message) + 1
            usage = as_dict(message.get("usage"), "usage")
            inputs, read = whole(usage.get("input_tokens")), whole(usage.get("cache_read_input_tokens"))
            created = whole(usage.get("cache_creation_input_tokens"))
            # Anthropic counts cache reads and writes apart from input_tokens; the store's input_tokens
            # include them (docs/schema.md, as the OTel GenAI conventions count), or a session that reads
            # mostly from the cache would show a fraction of its prompt.
            self.calls.append(ImportedLLMCall(
                step=step, model=self.model,
                input_tokens=None if inputs is None else inputs + (read or 0) + (created or 0),
                output_tokens=whole(usage.get("output_tokens")),
                cache_read_tokens=read, cache_creation_tokens=created, started_at=when, ended_at=when,
                stop_reason=_str(message.get("stop_reason")),
            ))
        call = self.calls[step - 1]
        if isinstance(message.get("stop_reason"), str):
            call.stop_reason = message["stop_reason"]
        usage = as_dict(message.get("usage"), "usage")
        if whole(usage.get("output_tokens")) is not None:  # the last line of a response has the final count
            call.output_tokens = whole(usage.get("output_tokens"))
        self.last_stop = call.stop_reason
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content_text(content)}]
        for block in blocks:
            if not isinstance(block, dict):
                continue
            mine = [s for s in self.steps if s.step == step]
            if block.get("type") == "text" and block.get("text"):
                self._thought(step, mine, block["text"], when, call)
            elif block.get("type") == "tool_use":
                self._tool(step, mine, block, when, call)

    def _thought(self, step: int, mine: list[ImportedStep], text: str, when: Any,
                 call: ImportedLLMCall) -> None:
        if mine:
            mine[0].thought = "\n".join(t for t in (mine[0].thought, text) if t)
            return
        self.steps.append(ImportedStep(step=step, thought=text, started_at=when, ended_at=when,
                                       context_tokens=call.input_tokens))

    def _tool(self, step: int, mine: list[ImportedStep], block: dict[str, Any], when: Any,
              call: ImportedLLMCall) -> None:
        name = block.get("name") if isinstance(block.get("name"), str) else None
        tid = block.get("id") if isinstance(block.get("id"), str) else None
        if mine and mine[0].tool is None and len(mine) == 1:
            s = mine[0]
            s.tool, s.args, s.tool_call_id = name, block.get("input"), tid
        else:
            s = ImportedStep(step=step, tool=name, args=block.get("input"), tool_call_id=tid,
                             call_index=len(mine), started_at=when, ended_at=when,
                             context_tokens=None if mine else call.input_tokens)
            self.steps.append(s)
        if tid:
            self.pending[tid] = s

    def user(self, message: dict[str, Any], when: Any) -> None:
        content = message.get("content")
        if isinstance(content, str):
            self._said(content)
            return
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                call = self.pending.pop(str(block.get("tool_use_id")), None)
                if call is not None:
                    call.observation = content_text(block.get("content"))
                    call.ended_at = when or call.ended_at
                    if block.get("is_error"):
                        call.is_error, call.error_type = True, "tool_error"
            elif block.get("type") == "text":
                self._said(content_text(block.get("text")))

    def _said(self, text: str) -> None:
        if text.startswith(_INTERRUPTED):
            self.interrupted = True
        elif self.task is None and text:
            self.task = text

    def status(self) -> tuple[str, str | None]:
        if self.error:
            return "error", self.error
        if self.interrupted:
            return "interrupted", "the user interrupted the session"
        if self.last_stop == "end_turn" and not self.pending:
            return "ok", None
        return "incomplete", None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_entries(entries: list[Any], path: Path) -> list[Trajectory]:
    runs: dict[str, _Run] = {}
    session = None
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("message"), dict):
            continue
        session = session or entry.get("sessionId")
        key = f"agent:{entry.get('agentId') or 'sidechain'}" if entry.get("isSidechain") else ""
        run = runs.setdefault(key, _Run())
        when = iso_time(entry.get("timestamp"))
        if when is not None:
            run.times.append(when)
        if entry.get("type") == "assistant":
            run.assistant(entry, entry["message"], when)
        elif entry.get("type") == "user":
            run.user(entry["message"], when)
    out = []
    for key, run in runs.items():
        status, error = run.status()
        usage = [c for c in run.calls if c.input_tokens is not None]
        attributes: dict[str, Any] = {"format": "claude-code"}
        if session:
            attributes["session_id"] = session
        out.append(Trajectory(
            source=str(path), agent=AGENT if not key else f"{AGENT} subagent", status=status, steps=run.steps,
            task=clip(run.task), model=run.model, error=error, key=key, llm_calls=run.calls,
            parent_key="" if key and "" in runs else None,
            input_tokens=sum(c.input_tokens or 0 for c in usage) if usage else None,
            output_tokens=sum(c.output_tokens or 0 for c in usage) if usage else None,
            started_at=min(run.times, default=None), ended_at=max(run.times, default=None),
            attributes=attributes,
        ))
    return out
