"""OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Every line is ``{timestamp, type, payload}``: ``session_meta`` (the session's id, cwd, CLI version, and
for a fork the session it came from), ``turn_context`` (the model of each turn), ``response_item``
(what went to and came from the model: messages, ``reasoning``, ``function_call`` and its
``function_call_output``), ``event_msg`` (``task_started``, ``task_complete``, ``turn_aborted``,
``token_count``, ``item_completed`` with a command's exit code) and, in newer versions,
``token_usage_record`` (one per model response, with its ``response_id``).

A step is one model response: the output items (reasoning, calls, the assistant's message) between
two inputs (the user's message, tool results) or two usage records. Its usage is the response's
record (``token_usage_record``; a file without them: each ``token_count`` whose total moved, its
``last_token_usage``). A session is one run, all its turns in order (``codex exec resume`` appends a
turn to the same file); how the last turn ended is how the run ended. The run's id is the session's
id and its record count (the file only grows), so a fork, whose ``session_meta`` names its origin and
the origin's record count when it was forked, is linked to exactly that run (``forked_from``).

Codex prefixes each command's output with bookkeeping for the model; its ``Chunk ID`` line is random
on every call and is dropped from the observation (it would make identical results look new). The
wall time stays: the analyzer reads durations as volatile already.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from .text import clip, content_text
from .trajectory import ImportedLLMCall, ImportedStep, Trajectory, imported_run_id
from .values import iso_time, whole

__all__ = ["AGENT", "FORMAT", "is_rollout", "parse_entries", "session_origin"]

AGENT = FORMAT = "codex-cli"
_OUTPUTS = frozenset({"reasoning", "function_call", "custom_tool_call", "local_shell_call", "web_search_call"})
_CHUNK_ID = re.compile(r"^Chunk ID: [0-9A-Za-z]+\n", re.MULTILINE)
_EXIT_CODE = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
_USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens",
               "reasoning_output_tokens", "total_tokens")


def is_rollout(entries: list[Any]) -> bool:
    """Lines shaped ``{timestamp, type, payload}``, one of them the session's or a response item.
    Record types a newer CLI adds (0.169 added ``world_state``) are allowed and skipped."""
    head = entries[:20]
    return bool(head) and all(
        isinstance(e, dict) and isinstance(e.get("payload"), dict) and "timestamp" in e
        and isinstance(e.get("type"), str) for e in head) and any(
        e["type"] in ("session_meta", "response_item") for e in head)


def session_origin(session_id: str) -> str:
    """What a session's run id hashes, with its record count as the key."""
    return f"{FORMAT}/{session_id}"


def _text(payload: dict[str, Any]) -> str:
    return content_text(payload.get("content"))


def _arguments(raw: Any) -> tuple[Any, bool]:
    """(arguments, parsed): a JSON string decoded; text that is not JSON kept as text."""
    if not isinstance(raw, str):
        return raw, True
    try:
        return json.loads(raw), True
    except ValueError:
        return raw, False


def _usage(raw: Any) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    usage = {k: v for k in _USAGE_KEYS if (v := whole(raw.get(k))) is not None}
    return usage if "input_tokens" in usage or "output_tokens" in usage else None


def _output(raw: Any) -> tuple[str, int | None]:
    """A tool result's text for the observation, and the exit code it states. Older CLIs wrote a JSON
    string ``{"output", "metadata": {"exit_code"}}``; newer ones text headed by ``Process exited with
    code N``."""
    text = raw if isinstance(raw, str) else content_text(raw.get("content") if isinstance(raw, dict) else raw)
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("output"), str):
            meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
            code = meta.get("exit_code")
            return data["output"], code if isinstance(code, int) else None
    found = _EXIT_CODE.search(text)
    return _CHUNK_ID.sub("", text, count=1), int(found.group(1)) if found else None


class _Session:
    def __init__(self) -> None:
        self.meta: dict[str, Any] = {}
        self.steps: list[ImportedStep] = []
        self.calls: list[ImportedLLMCall] = []
        self.open = False  # output items since the last input or usage record belong to the last step
        self.by_call: dict[str, ImportedStep] = {}  # call_id -> its tool call
        self.exits: dict[str, tuple[int | None, str | None]] = {}  # call_id -> (exit code, status) reported
        self.stated: dict[str, int | None] = {}  # call_id -> the exit code its output states
        self.last_total: dict[str, int] | None = None  # the last ``token_count`` total seen
        self.task: str | None = None
        self.model: str | None = None
        self.turns: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.times: list[datetime] = []
        self.totals: dict[str, int] = {}

    # -- the steps ------------------------------------------------------------------------------------
    def _step(self, when: datetime | None) -> tuple[int, list[ImportedStep]]:
        if not self.open:
            self.open = True
            self.steps.append(ImportedStep(step=(self.steps[-1].step + 1) if self.steps else 1,
                                           started_at=when, ended_at=when))
        n = self.steps[-1].step
        return n, [s for s in self.steps if s.step == n]

    def output(self, item: dict[str, Any], when: datetime | None) -> None:
        n, mine = self._step(when)
        first = mine[0]
        first.ended_at = when or first.ended_at
        kind = item.get("type")
        text = ""
        if kind == "reasoning":
            text = "\n".join(content_text(s.get("text")) for s in item.get("summary") or [] if isinstance(s, dict))
        elif kind == "message":
            text = _text(item)
        if text:
            first.thought = "\n".join(t for t in (first.thought, text) if t)
            return
        if kind not in ("function_call", "custom_tool_call", "local_shell_call"):
            return
        call = first if first.tool is None and len(mine) == 1 else ImportedStep(
            step=n, call_index=len(mine), started_at=when, ended_at=when)
        if call is not first:
            self.steps.append(call)
        call.tool_call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        if kind == "function_call":
            call.tool = item.get("name") if isinstance(item.get("name"), str) else None
            call.args, parsed = _arguments(item.get("arguments"))
            if not parsed:
                call.error_type = "invalid_arguments"
        elif kind == "custom_tool_call":  # a freeform tool (apply_patch): its input is text
            call.tool, call.args = item.get("name"), {"input": item.get("input")}
        else:  # the older built-in shell
            action = item.get("action") if isinstance(item.get("action"), dict) else {}
            call.tool, call.args = "local_shell", {"command": action.get("command")}
        if call.tool_call_id:
            self.by_call[call.tool_call_id] = call

    def result(self, item: dict[str, Any], when: datetime | None) -> None:
        self.open = False
        call = self.by_call.get(str(item.get("call_id")))
        if call is None:
            return
        call.observation, self.stated[str(item.get("call_id"))] = _output(item.get("output"))
        call.ended_at = when or call.ended_at

    def executed(self, item: dict[str, Any]) -> None:
        """A command's end as the CLI reports it (``item_completed`` of a ``CommandExecution``, or the
        older ``exec_command_end``): its exit code and status, before or after the result item."""
        code, status = item.get("exit_code"), item.get("status")
        self.exits[str(item.get("id") if "id" in item else item.get("call_id"))] = (
            code if isinstance(code, int) else None, status if isinstance(status, str) else None)

    def judge(self) -> None:
        """Each answered call's exit code (the CLI's report, else the one its output states): not 0 is
        a ``command_error``; a call the CLI reports failed or declined without one is an error too."""
        for cid, call in self.by_call.items():
            if call.observation is None:
                continue
            code, status = self.exits.get(cid, (None, None))
            code = code if code is not None else self.stated.get(cid)
            if code is not None:
                call.events.append({"name": "exit_code", "time": None, "attributes": {"exit_code": code}})
            if call.error_type is not None:
                continue
            if code is not None and code != 0:
                call.is_error, call.error_type = True, "command_error"
            elif code is None and status in ("failed", "declined"):
                call.is_error, call.error_type = True, "tool_denied" if status == "declined" else "tool_error"

    def usage(self, raw: Any, when: datetime | None, response_id: Any = None) -> None:
        usage = _usage(raw)
        if usage is None:
            return
        self.open = False
        step = self.steps[-1].step if self.steps else None
        if step is not None and any(c.step == step for c in self.calls):
            step = None  # a response that recorded no output item: a call of no step
        self.calls.append(ImportedLLMCall(
            step=step, model=self.model, input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"), cache_read_tokens=usage.get("cached_input_tokens"),
            cache_creation_tokens=usage.get("cache_write_input_tokens"), started_at=when, ended_at=when))
        for k, v in usage.items():
            self.totals[k] = self.totals.get(k, 0) + v
        if step is not None:
            first = next(s for s in self.steps if s.step == step)
            first.input_tokens = first.context_tokens = usage.get("input_tokens")
            first.output_tokens = usage.get("output_tokens")
            attributes = {**usage, **({"response_id": response_id} if isinstance(response_id, str) else {})}
            first.events.append({"name": "usage", "time": None, "attributes": attributes})

    # -- the turns ------------------------------------------------------------------------------------
    def event(self, payload: dict[str, Any], when: datetime | None, counts: bool) -> None:
        kind = payload.get("type")
        if kind == "task_started":
            self.open = False
            self.turns.append({"turn_id": payload.get("turn_id"), "end": None})
        elif kind in ("task_complete", "turn_aborted"):
            self.open = False
            if not self.turns:
                self.turns.append({"turn_id": payload.get("turn_id"), "end": None})
            turn = self.turns[-1]
            error = payload.get("error") if isinstance(payload.get("error"), dict) else None
            if kind == "turn_aborted":
                turn.update(end="interrupted", reason=payload.get("reason"))
            elif error is not None:
                turn.update(end="error", error=content_text(error.get("message")) or "error",
                            error_kind=error.get("codex_error_info"))
            else:
                turn.update(end="ok", answer=payload.get("last_agent_message"))
        elif kind in ("error", "stream_error") and isinstance(payload.get("message"), str):
            self.errors.append(payload["message"])
        elif kind == "token_count" and counts:
            info = payload.get("info") if isinstance(payload.get("info"), dict) else {}
            total = _usage(info.get("total_token_usage"))
            if total is not None and total != self.last_total:  # a repeat of the same count is no new response
                self.last_total = total
                self.usage(info.get("last_token_usage"), when)
        elif kind == "item_completed" and isinstance(payload.get("item"), dict):
            if payload["item"].get("type") == "CommandExecution":
                self.executed(payload["item"])
        elif kind == "exec_command_end":
            self.executed(payload)

    def status(self) -> tuple[str, str | None, str | None]:
        """(status, error, answer) from how the last turn ended."""
        turn = self.turns[-1] if self.turns else {"end": None}
        if turn["end"] == "ok":
            pending = any(s.tool is not None and s.observation is None for s in self.steps)
            return ("incomplete" if pending else "ok"), None, turn.get("answer")
        if turn["end"] == "error":
            # The message is the CLI's words for the user ("We're currently experiencing high demand" for
            # any 500); its error kind says what happened, so the error keeps both.
            kind = turn.get("error_kind")
            return "error", turn["error"] + (f" ({kind})" if isinstance(kind, str) and kind else ""), None
        if turn["end"] == "interrupted":
            return "interrupted", f"the turn was aborted ({turn.get('reason') or 'interrupted'})", None
        return "incomplete", self.errors[-1] if self.errors else None, None


def _record_count(entries: list[Any]) -> int:
    """The records of the file, counted as Codex counts them (``ordinal``, else lines): a fork names
    its origin by this count."""
    ordinals = [e.get("ordinal") for e in entries if isinstance(e, dict)]
    if ordinals and all(isinstance(o, int) for o in ordinals):
        return max(ordinals) + 1
    return len(entries)


def parse_entries(entries: list[Any], path: Path) -> list[Trajectory]:
    """One run: the session in ``entries`` (the parsed lines of its rollout)."""
    s = _Session()
    counts_only = not any(isinstance(e, dict) and e.get("type") == "token_usage_record" for e in entries)
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("payload"), dict):
            continue
        payload, kind, when = entry["payload"], entry.get("type"), iso_time(entry.get("timestamp"))
        if when is not None:
            s.times.append(when)
        if kind == "session_meta" and not s.meta:
            s.meta = payload
        elif kind == "turn_context" and isinstance(payload.get("model"), str):
            s.model = payload["model"]
        elif kind == "token_usage_record":
            s.usage(payload.get("usage"), when, payload.get("response_id"))
        elif kind == "event_msg":
            s.event(payload, when, counts_only)
        elif kind == "response_item":
            item_type, role = payload.get("type"), payload.get("role")
            if item_type in _OUTPUTS or (item_type == "message" and role == "assistant"):
                s.output(payload, when)
            elif item_type in ("function_call_output", "custom_tool_call_output"):
                s.result(payload, when)
            elif item_type == "message" and role == "user":
                s.open = False
                text = _text(payload)
                if s.task is None and text and not text.lstrip().startswith(("<", "# AGENTS.md")):
                    s.task = text
    s.judge()
    return [_trajectory(s, entries, path)]


def _trajectory(s: _Session, entries: list[Any], path: Path) -> Trajectory:
    status, error, answer = s.status()
    meta = s.meta
    session_id = meta.get("id") if isinstance(meta.get("id"), str) else None
    attributes: dict[str, Any] = {"format": FORMAT}
    for key in ("cwd", "cli_version", "originator", "source", "model_provider", "git"):
        if meta.get(key) not in (None, {}, ""):
            attributes[key] = meta[key]
    if session_id:
        attributes["session_id"] = session_id
    forked = meta.get("forked_from_id")
    fork_count = whole(meta.get("forked_from_ordinal_exclusive"))
    if isinstance(forked, str):
        attributes["forked_from_session"] = forked
    attributes["turns"] = s.turns
    if s.totals:
        attributes["tokens"] = s.totals
    known = [c for c in s.calls if c.input_tokens is not None]
    return Trajectory(
        source=str(path), agent=AGENT, status=status, steps=s.steps, task=clip(s.task), model=s.model,
        answer=answer, error=error, llm_calls=s.calls, attributes=attributes,
        input_tokens=sum(c.input_tokens or 0 for c in known) if known else None,
        output_tokens=sum(c.output_tokens or 0 for c in s.calls) if s.calls else None,
        started_at=min(s.times, default=None), ended_at=max(s.times, default=None),
        origin=session_origin(session_id) if session_id else "", key=str(_record_count(entries)) if session_id else "",
        forked_from=imported_run_id(session_origin(forked), str(fork_count))
        if isinstance(forked, str) and fork_count is not None else None,
    )
