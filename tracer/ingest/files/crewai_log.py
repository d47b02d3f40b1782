"""CrewAI task logs: the JSON file ``Crew(output_log_file="....json")`` writes.

CrewAI appends one entry when a task starts and one when it completes: ``{timestamp, task_name, task,
agent, status: "started" | "completed", output}``, the agent being its role. That is all the file
holds: no model calls, no tool calls, no record of a cap (a ``max_iter`` forces a final answer,
which is logged as an ordinary completion) or of an exception (a task that raised simply has no
``completed`` entry).

- Each completed task is a step of the agent that ran it: its description is the step's task, its
  output the thought. A task that started and never completed is a last step with no output.
- The end: every started task completed is ``ok`` (CrewAI's own word for it, and the last output
  is the answer); a task left without its ``completed`` entry is ``incomplete``: the log cannot tell
  a crash from a kill, so it does not say ``error``.
- Timestamps are local times without a zone (``%Y-%m-%d %H:%M:%S``): kept in ``attributes``, not
  guessed into UTC.

The crew's agents work on separate tasks: each agent's tasks are also a sub-run under the crew's run,
and its end is its own (``ok`` when each of its tasks completed, ``incomplete`` when one was left open).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from .errors import TrajectoryFormatError
from .subruns import with_agent_subruns
from .text import clip
from .trajectory import ImportedStep, Trajectory

__all__ = ["is_task_log", "parse"]

_STATUSES = frozenset({"started", "completed"})


def is_task_log(data: Any) -> bool:
    return isinstance(data, list) and bool(data) and all(
        isinstance(e, dict) and isinstance(e.get("status"), str) and e["status"] in _STATUSES
        and isinstance(e.get("agent"), str)
        and ("task" in e or "task_name" in e) and "timestamp" in e for e in data)


def parse(data: Any, path: Path) -> list[Trajectory]:
    steps: list[ImportedStep] = []
    open_tasks: dict[tuple[str, str, str], ImportedStep] = {}
    for e in data:
        key = (str(e.get("task_name")), str(e.get("task")), e["agent"])
        if e["status"] == "started":
            step = ImportedStep(step=len(steps) + 1, agent=e["agent"])
            open_tasks[key] = step
            steps.append(step)
        else:
            step = open_tasks.pop(key, None) or ImportedStep(step=len(steps) + 1, agent=e["agent"])
            if step not in steps:
                steps.append(step)
            step.thought = str(e.get("output") or "") or None
    if not steps:
        raise TrajectoryFormatError("no steps: the task log has no task")
    status = "incomplete" if open_tasks else "ok"
    first = data[0]
    team = Trajectory(
        source=str(path), agent=Counter(s.agent for s in steps).most_common(1)[0][0] or "crew", status=status, steps=steps,
        task=clip(str(first.get("task") or first.get("task_name") or "") or None),
        answer=steps[-1].thought if status == "ok" else None,
        attributes={"format": "crewai", "tasks": [str(e.get("task_name")) for e in data if e["status"] == "started"],
                    "first_timestamp": first.get("timestamp"), "last_timestamp": data[-1].get("timestamp"),
                    **({"agents": sorted({s.agent for s in steps if s.agent})}
                       if len({s.agent for s in steps}) > 1 else {})},
    )
    left_open = {s.agent for s in open_tasks.values()}
    return with_agent_subruns(team, lambda agent: "incomplete" if agent in left_open else "ok")
