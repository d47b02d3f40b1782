"""Sub-runs per agent: a team's run, and under it one run per agent holding that agent's turns.

Where a framework keeps its agents separate (CrewAI's agents each run their own tasks; Magentic-One's
orchestrator hands work to agents that each keep their own context), a user asks of one agent what they
ask of a run: did it loop, did its tools fail. So each agent's turns also form a sub-run, linked by
``parent_run_id`` to the team's run, the link Claude Code's sidechains and the loop's sub-agents use.

The team's run keeps every turn in order (its verdict is the team's: how the conversation ended);
a sub-run holds copies of its agent's steps, renumbered from 1, each still naming its agent. An
agent's part ends when the team's run ends, so a sub-run carries the team's status, error and end
attributes: a team stopped by its round cap stopped each agent in it. A format that records each
agent's own end (CrewAI's task log: every task's start and completion) passes ``status_of`` instead.
Sub-runs are made only when at least two agents took turns; an agent with no turn gets none (no run
without steps).

A sub-run's usage and times are its own steps': the team's totals copied onto each sub-run made
every agent look as costly and as long as the whole team, and any sum over runs count the team's
tokens once per agent. What the steps do not record stays unknown (None), never the team's figure.
The roll-ups count a sub-run's steps under its agent and only the rest under the team's run
(``run_usage`` in ``store/views.py``), so a sum over agents counts each token once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .trajectory import ImportedStep, Trajectory

__all__ = ["with_agent_subruns"]


def with_agent_subruns(team: Trajectory, status_of: Callable[[str], str] | None = None) -> list[Trajectory]:
    """``[team, sub-run of each agent with turns...]``, or ``[team]`` when fewer than two agents spoke.
    ``status_of(agent)`` is the agent's own end where the source records it, else the team's status."""
    agents = list(dict.fromkeys(s.agent for s in team.steps if s.agent))
    if len(agents) < 2:
        return [team]
    runs = [team]
    for agent in agents:
        steps = [replace(s, step=n) for n, s in enumerate((s for s in team.steps if s.agent == agent), 1)]
        attributes = {k: v for k, v in team.attributes.items() if k != "agents"} | {"team_agent": agent}
        status = status_of(agent) if status_of is not None else team.status
        runs.append(replace(team, agent=agent, steps=steps, status=status, llm_calls=[], answer=None, attributes=attributes,
                            key=f"{team.key}/agent:{agent}", parent_key=team.key, **_own_usage(steps)))
    return runs


def _own_usage(steps: list[ImportedStep]) -> dict[str, Any]:
    """Tokens and times of these steps alone (a step's several tool calls share its model call, so
    its tokens are counted once, from its first call); None where no step records them."""
    first_calls = [s for s in steps if s.call_index == 0]
    inputs = [s.input_tokens for s in first_calls if s.input_tokens is not None]
    outputs = [s.output_tokens for s in first_calls if s.output_tokens is not None]
    starts = [s.started_at for s in steps if s.started_at is not None]
    ends = [s.ended_at or s.started_at for s in steps if (s.ended_at or s.started_at) is not None]
    return {"input_tokens": sum(inputs) if inputs else None, "output_tokens": sum(outputs) if outputs else None,
            "cost_usd": None, "started_at": min(starts, default=None), "ended_at": max(ends, default=None)}
