"""Google Gemini CLI session logs (``~/.gemini/tmp/<project>/chats/session-*.jsonl``).

The first line is the session (``sessionId``, ``projectHash``, ``startTime``, ``kind``); then each
line is a message record (``{id, timestamp, type, content, ...}``: ``user``, ``gemini``, ``info``,
``error``, ``warning``) or a patch of the session (``{"$set": {...}}``). A record is written again
under its id when it changes (a ``gemini`` response gets its ``toolCalls`` once they ran): the last
version counts, in the order ids first appeared. A ``$set`` of ``messages`` rewrites the CLI's
history: its messages count too, but a message it drops is not forgotten here, because the file is
the record of what happened and the rewrite is the CLI rolling back what its model never answered.

A step is one ``gemini`` record: its ``thoughts`` (subject and description) and ``content`` the
thought, its ``toolCalls`` the calls (``name``, ``args``, the ``functionResponse`` output as the
observation; ``Exit Code: N`` ≠ 0 a ``command_error``, a status other than ``success`` an error),
its ``tokens`` one LLM call. The CLI prefixes no ids to results, but ends a shell result with the
command's process group (``Process Group PGID: N``), a new number every call: that line is dropped
from the observation, so identical results compare equal.

How it ended, on the file's evidence: the CLI's loop detector's message (``Potential loop
detected``) → ``stagnated``; an ``error`` record → ``error``; a last response with text and every
call answered → ``ok``; a turn the CLI rolled back with no response after it → ``incomplete`` with
that said in ``error``; else ``incomplete``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .text import clip, content_text
from .trajectory import ImportedLLMCall, ImportedStep, Trajectory
from .values import iso_time, whole

__all__ = ["AGENT", "FORMAT", "is_session_log", "parse_entries"]

AGENT = FORMAT = "gemini-cli"
_PGID = re.compile(r"^Process Group PGID: \d+\n", re.MULTILINE)
_EXIT = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)
_LOOP = "Potential loop detected"


def is_session_log(entries: list[Any]) -> bool:
    """A first line naming the session and its project, then records or ``$set`` patches."""
    head = entries[:20]
    return bool(head) and isinstance(head[0], dict) and isinstance(head[0].get("sessionId"), str) \
        and "projectHash" in head[0] and all(isinstance(e, dict) for e in head)


def _messages(entries: list[Any]) -> tuple[list[dict[str, Any]], bool]:
    """Every message record, its last version, in the order ids first appeared; and whether a ``$set``
    dropped a message the file had recorded (the CLI rolled its history back)."""
    found: dict[str, dict[str, Any]] = {}
    dropped = False
    for e in entries[1:]:
        if not isinstance(e, dict):
            continue
        patch = e.get("$set")
        batch = patch.get("messages") if isinstance(patch, dict) else [e] if "type" in e else None
        if not isinstance(batch, list):
            continue
        if isinstance(patch, dict):
            dropped = dropped or bool(set(found) - {str(m.get("id")) for m in batch if isinstance(m, dict)})
        for m in batch:
            if isinstance(m, dict) and isinstance(m.get("type"), str):
                found[str(m.get("id", len(found)))] = m
    return list(found.values()), dropped


def _call(step: int, index: int, call: dict[str, Any]) -> ImportedStep:
    s = ImportedStep(step=step, call_index=index, tool=call.get("name") if isinstance(call.get("name"), str) else None,
                     args=call.get("args"), tool_call_id=call.get("id") if isinstance(call.get("id"), str) else None,
                     ended_at=iso_time(call.get("timestamp")))
    outputs = []
    for r in call.get("result") or []:
        response = r.get("functionResponse", {}).get("response") if isinstance(r, dict) else None
        if isinstance(response, dict):
            outputs.append(content_text(response.get("output", response.get("error"))))
    if outputs or call.get("status"):
        s.observation = _PGID.sub("", "\n".join(outputs))
    code = _EXIT.search(s.observation or "")
    if code is not None:
        s.events.append({"name": "exit_code", "time": None, "attributes": {"exit_code": int(code.group(1))}})
    if code is not None and code.group(1) != "0":
        s.is_error, s.error_type = True, "command_error"
    elif call.get("status") not in (None, "success"):
        s.is_error, s.error_type = True, "tool_error"
    return s


def parse_entries(entries: list[Any], path: Path) -> list[Trajectory]:
    header = entries[0]
    messages, dropped = _messages(entries)
    steps: list[ImportedStep] = []
    calls: list[ImportedLLMCall] = []
    task = model = error = None
    loop = False
    last = None  # the last record that is a turn (a response, or the user's message after one)
    for m in messages:
        kind, when = m.get("type"), iso_time(m.get("timestamp"))
        text = content_text(m.get("content"))
        if kind == "user":
            if _LOOP in text:
                loop, error = True, text
            elif text and not text.startswith("<session_context>") and not text.startswith("System:"):
                task = task or text
                last = m
        elif kind == "error":
            error = text or "error"
        elif kind == "gemini":
            n = len({s.step for s in steps}) + 1
            model = m.get("model") if isinstance(m.get("model"), str) else model
            thoughts = [": ".join(p for p in (t.get("subject"), t.get("description")) if p)
                        for t in m.get("thoughts") or [] if isinstance(t, dict)]
            thought = "\n".join(t for t in (*thoughts, text) if t) or None
            tokens = m.get("tokens") if isinstance(m.get("tokens"), dict) else {}
            inputs, outputs = whole(tokens.get("input")), whole(tokens.get("output"))
            thinking = whole(tokens.get("thoughts"))
            spent = None if outputs is None else outputs + (thinking or 0)  # output counts reasoning, as OTel's
            made = [_call(n, i, c) for i, c in enumerate(m.get("toolCalls") or []) if isinstance(c, dict)]
            first = made[0] if made else ImportedStep(step=n)
            first.thought, first.started_at = thought, when
            first.input_tokens = first.context_tokens = inputs
            first.output_tokens = spent
            if tokens:
                first.events.append({"name": "usage", "time": None, "attributes": tokens})
            steps.extend(made or [first])
            calls.append(ImportedLLMCall(step=n, model=model, input_tokens=inputs, output_tokens=spent,
                                         cache_read_tokens=whole(tokens.get("cached")), started_at=when, ended_at=when))
            last = m
    status, answer = "incomplete", None
    if loop:
        status = "stagnated"
    elif error is not None:
        status = "error"
    elif last is not None and last.get("type") == "gemini" and content_text(last.get("content")) \
            and all(s.observation is not None for s in steps if s.tool is not None):
        status, answer = "ok", content_text(last.get("content"))
    elif dropped and (last is None or last.get("type") == "user"):
        error = "the CLI rolled this turn back out of its history: no response to it was recorded"
    times = [t for m in messages if (t := iso_time(m.get("timestamp"))) is not None]
    known = [c for c in calls if c.input_tokens is not None]
    return [Trajectory(
        source=str(path), agent=AGENT, status=status, steps=steps, task=clip(task), model=model, answer=answer,
        error=error, llm_calls=calls, started_at=min(times, default=iso_time(header.get("startTime"))),
        ended_at=max(times, default=None),
        input_tokens=sum(c.input_tokens or 0 for c in known) if known else None,
        output_tokens=sum(c.output_tokens or 0 for c in known) if known else None,
        attributes={"format": FORMAT, "session_id": header["sessionId"], "project_hash": header.get("projectHash"),
                    "kind": header.get("kind"), "history_rolled_back": dropped},
    )]
