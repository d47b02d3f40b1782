"""Chat transcripts without tool calls: a list of ``{role, content, name?}``, bare or under ``messages``/``history``.

This is also where multi-agent logs land, since they are chats whose speakers are agents:

- AutoGen 0.2 / AG2 group chats write each agent's turn with its ``name`` (and role ``user`` or
  ``assistant``, depending on who reads the log). A fenced code block in a turn is a tool call (tool
  ``python``, ``sh``, ...; arguments ``{"code": ...}``); the executor's ``exitcode: N`` reply is its
  observation, failed when N is not 0, and not a turn of its own.
- Magentic-One's orchestrator logs put the agent in the ``role`` itself (``Orchestrator (thought)``,
  ``WebSurfer``, ``Orchestrator (termination condition)``): a role that is none of the standard ones
  is the speaker's name.

Each agent's turn is a step; its agent (and the role as written) is recorded as the step's ``agent``
event. A run's end needs evidence: the source's ``status`` if it names one. Else, in a chat with one
agent, ``ok`` when the last message is the agent's (its answer) and ``incomplete`` when a person or
nobody spoke last. In a group chat (two agents or more) an agent always has the last word, so that
is no evidence of an end: the run is ``incomplete`` (no end recorded) and the analyzer decides from
what the chat says (a termination word, a final answer, a crash, a round limit: ending.py, rules.py).
The last agent message is kept as the run's answer either way, so end markers are read there; the
number of messages, and a round or message limit the file records (``max_round``, ``max_turns``,
...), are kept in the run's attributes. A file with messages of which none is an agent's turn is
skipped with that reason, never imported as a run with no steps.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from .errors import TrajectoryFormatError
from .trajectory import ImportedStep, Trajectory, estimate_tokens
from .text import RUN_STATUSES, as_dict, clip, content_text, first_user_text, message_chars

__all__ = ["DEFAULT_AGENT", "LIMIT_KEYS", "is_message", "messages_of", "parse", "speaker"]

DEFAULT_AGENT = "chat"
# A round or message limit a chat file may record beside its messages (kept for the analyzer).
LIMIT_KEYS = ("max_round", "max_rounds", "max_turns", "max_messages")
_HUMAN_NAMES = frozenset({"user", "human", "customer", "user_proxy", "userproxy"})
_STANDARD_ROLES = frozenset({"system", "tool", "function", "user", "human", "developer", "ipython"})
_NOT_SPEAKERS = frozenset({"system", "tool", "function", "developer", "ipython"})
# AutoGen's code executor answers a code block with "exitcode: N (execution succeeded|failed)".
_EXITCODE = re.compile(r"^\s*exitcode:\s*(-?\d+)")
_CODE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def is_message(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("role"), str)


def messages_of(data: Any) -> list[Any] | None:
    """The message list a file holds, if it holds one."""
    if isinstance(data, dict):
        for key in ("messages", "history", "chat_history"):
            value = data.get(key)
            if isinstance(value, list):
                return value
        return None
    return data if isinstance(data, list) else None


def speaker(m: dict[str, Any]) -> str | None:
    """The agent that wrote ``m`` ("" for an unnamed assistant), or None for a person or the system."""
    role = m.get("role")
    name = m.get("name") if isinstance(m.get("name"), str) else ""
    if role == "assistant":
        return name
    if isinstance(role, str) and role.strip() and role.lower() not in _STANDARD_ROLES and role.lower() != "assistant":
        return name or role.strip()  # Magentic-One: the role is the agent
    if role in _NOT_SPEAKERS or not name or name.lower() in _HUMAN_NAMES:
        return None
    return name


def _agent_name(who: str) -> str:
    """``Orchestrator (thought)`` -> ``Orchestrator``: the agent, without the kind of message."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", who) or who


def _code_call(step: ImportedStep, text: str) -> None:
    found = _CODE.search(text)
    if found:
        step.tool = found.group(1).lower() or "code"
        step.args = {"code": found.group(2).strip()}


def parse(data: Any, path: Path) -> list[Trajectory]:
    messages = messages_of(data) or []
    meta = data if isinstance(data, dict) else {}
    steps: list[ImportedStep] = []
    speakers: Counter[str] = Counter()
    chars = 0
    last_speaker: str | None = None
    for i, raw in enumerate(messages):
        m = as_dict(raw, f"message {i}")
        text = content_text(m.get("content"))
        exit_code = _EXITCODE.match(text)
        # The executor answers the latest code block still waiting, whoever spoke in between (AG2's
        # round robin lets a reviewer talk before the code runs).
        waiting = next((s for s in reversed(steps) if s.tool is not None and s.observation is None), None)
        if exit_code and waiting is not None:  # the executor's reply to the last code block
            waiting.observation = text
            waiting.is_error = exit_code.group(1) != "0"
            chars += message_chars(m)
            continue
        who = speaker(m)
        last_speaker = who
        if who is not None:
            agent = _agent_name(who) if who else ""
            if agent:
                speakers[agent] += 1
            step = ImportedStep(step=len(steps) + 1, thought=text or None, context_tokens=estimate_tokens(chars),
                                agent=agent or None, role=who if who != agent else None)
            _code_call(step, text)
            steps.append(step)
        chars += message_chars(m)
    if messages and not steps and meta.get("status") in (None, "ok", "incomplete") and not meta.get("error"):
        roles = ", ".join(sorted({str(m.get("role")) for m in messages if isinstance(m, dict)}))
        raise TrajectoryFormatError(f"no agent turns: {len(messages)} messages, none written by an agent "
                                    f"(roles: {roles})")
    group = len(speakers) > 1
    if meta.get("status") in RUN_STATUSES:
        status = meta["status"]
    else:  # one agent's last word is its answer; in a group chat an agent always has the last word
        status = "ok" if steps and last_speaker is not None and not group else "incomplete"
    model, error = meta.get("model"), meta.get("error")
    attributes: dict[str, Any] = {"format": "chat", "messages": len(messages)}
    if group:
        attributes["agents"] = sorted(speakers)
    attributes.update({k: v for k in LIMIT_KEYS if isinstance(v := meta.get(k), int) and not isinstance(v, bool)})
    answer = steps[-1].thought if status in ("ok", "incomplete") and steps and last_speaker is not None else None
    task = first_user_text(messages) or next(
        (content_text(m.get("content")) for m in messages if isinstance(m, dict) and speaker(m) is None
         and m.get("role") not in _NOT_SPEAKERS), None)
    return [Trajectory(
        source=str(path), agent=speakers.most_common(1)[0][0] if speakers else DEFAULT_AGENT, status=status,
        steps=steps, task=clip(task), model=model if isinstance(model, str) else None, answer=answer,
        error=error if isinstance(error, str) else None, attributes=attributes,
    )]
