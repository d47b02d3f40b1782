"""AutoGen AgentChat task results (``autogen-agentchat`` 0.4+): Magentic-One and the other teams.

A team's ``run()`` returns a ``TaskResult``; ``result.model_dump(mode="json")`` is the record a caller
saves: ``{"messages": [...], "stop_reason": ...}``, each message ``{source, type, content,
models_usage, created_at}``. The agent is the ``source``; ``user`` is the person.

- A ``TextMessage`` (or ``ToolCallSummaryMessage``, ``HandoffMessage``, ...) from an agent is a step.
- A ``ToolCallRequestEvent`` is a step whose calls are its ``content`` (``name``, ``arguments``,
  ``id``), answered by the ``ToolCallExecutionEvent`` results with the same ``call_id``
  (``is_error`` marks a failed call). A ``ThoughtEvent`` is the thought of the agent's next step.
- ``models_usage`` gives the step's tokens.
- The end: an ``error`` (a caller that caught the exception AgentChat raises and saved what was
  streamed) is ``error``; a ``stop_reason`` means the team's termination condition stopped it, ``ok``
  (the reason stays in ``attributes.stop_reason``, where the end markers read caps such as
  Magentic-One's ``Max rounds reached.``); no stop reason is ``incomplete``.

Magentic-One's orchestrator and its agents keep separate contexts: each agent's turns are also a
sub-run under the team's run (``subruns.py``).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import TrajectoryFormatError
from .subruns import with_agent_subruns
from .text import as_dict, clip, content_text
from .trajectory import ImportedStep, Trajectory, estimate_tokens

__all__ = ["is_task_result", "parse"]

_PERSON = "user"
_SKIPPED = frozenset({"StopMessage", "SelectSpeakerEvent", "SelectorEvent", "MemoryQueryEvent",
                      "UserInputRequestedEvent", "ModelClientStreamingChunkEvent", "CodeGenerationEvent"})


def is_task_result(data: Any) -> bool:
    messages = data.get("messages") if isinstance(data, dict) else None
    return (isinstance(messages, list) and bool(messages) and "stop_reason" in data
            and all(isinstance(m, dict) and isinstance(m.get("source"), str) and isinstance(m.get("type"), str)
                    for m in messages))


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")) if value else None
    except ValueError:
        return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _arguments(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else text
    except json.JSONDecodeError:
        return text


def _steps(messages: list[Any]) -> tuple[list[ImportedStep], list[str]]:
    steps: list[ImportedStep] = []
    waiting: dict[str, ImportedStep] = {}
    thoughts: dict[str, str] = {}
    agents: list[str] = []
    chars = 0
    for i, raw in enumerate(messages):
        m = as_dict(raw, f"message {i}")
        source, kind, content = m["source"], m["type"], m.get("content")
        usage = m.get("models_usage") if isinstance(m.get("models_usage"), dict) else {}
        if kind == "ToolCallExecutionEvent":
            for r in content if isinstance(content, list) else []:
                call = waiting.pop(str(r.get("call_id")), None) if isinstance(r, dict) else None
                if call is not None:
                    call.observation, call.is_error = content_text(r.get("content")), bool(r.get("is_error"))
        elif kind == "ThoughtEvent":
            thoughts[source] = content_text(content)
        elif source != _PERSON and kind not in _SKIPPED:
            n = len(steps) + 1
            prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
            base = {"step": n, "context_tokens": prompt or estimate_tokens(chars),
                    "input_tokens": prompt, "output_tokens": completion,
                    "agent": source, "started_at": _time(m.get("created_at")), "ended_at": _time(m.get("created_at")),
                    "thought": thoughts.pop(source, None)}
            calls = content if kind == "ToolCallRequestEvent" and isinstance(content, list) else None
            if calls:
                for k, c in enumerate(calls):
                    c = as_dict(c, f"message {i} call {k}")
                    step = ImportedStep(**base, tool=str(c.get("name")), args=_arguments(c.get("arguments")),
                                        call_index=k, tool_call_id=str(c.get("id")))
                    waiting[str(c.get("id"))] = step
                    steps.append(step)
            else:
                text = content_text(content)
                base["thought"] = "\n".join(t for t in (base["thought"], text) if t) or None
                steps.append(ImportedStep(**base))
            if source not in agents:
                agents.append(source)
        chars += len(content_text(content))
    return steps, agents


def parse(data: Any, path: Path) -> list[Trajectory]:
    messages = data["messages"]
    steps, agents = _steps(messages)
    if not steps:
        raise TrajectoryFormatError(f"no agent turns: {len(messages)} messages, none written by an agent")
    stop, error = data.get("stop_reason"), data.get("error")
    status = "error" if error else "ok" if stop else "incomplete"
    task = next((content_text(m.get("content")) for m in messages if m.get("source") == _PERSON), None)
    counts = {a: sum(s.agent == a for s in steps) for a in agents}
    attributes: dict[str, Any] = {"format": "autogen-agentchat", "stop_reason": stop}
    if len(agents) > 1:
        attributes["agents"] = sorted(agents)
    last = steps[-1]
    team = Trajectory(
        source=str(path), agent=max(agents, key=lambda a: counts[a]), status=status, steps=steps, task=clip(task),
        answer=last.thought if status == "ok" and last.tool is None else None,
        error=str(error) if error else None, attributes=attributes,
        input_tokens=sum(s.input_tokens or 0 for s in steps if s.call_index == 0) or None,
        output_tokens=sum(s.output_tokens or 0 for s in steps if s.call_index == 0) or None,
        started_at=next((s.started_at for s in steps if s.started_at), None),
        ended_at=next((s.ended_at for s in reversed(steps) if s.ended_at), None),
    )
    return with_agent_subruns(team)
