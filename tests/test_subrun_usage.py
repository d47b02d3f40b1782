"""A team's per-agent sub-runs carry their own agent's usage and times, not the team's totals
(tracer/ingest/files/subruns.py). Trajectories built inline: the function is pure."""

from __future__ import annotations

from datetime import datetime

from looptrace.tracer.ingest.files.subruns import with_agent_subruns
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory


def _at(minute: int) -> datetime:
    return datetime(2026, 1, 1, 12, minute)


def test_each_agent_subrun_has_its_own_tokens_and_times() -> None:
    steps = [
        ImportedStep(1, agent="planner", input_tokens=100, output_tokens=10, started_at=_at(0), ended_at=_at(1)),
        ImportedStep(2, agent="coder", tool="run", call_index=0, input_tokens=200, output_tokens=20,
                     started_at=_at(2), ended_at=_at(3)),
        ImportedStep(2, agent="coder", tool="run", call_index=1, input_tokens=200, output_tokens=20,
                     started_at=_at(2), ended_at=_at(3)),  # a second call of the same turn: counted once
        ImportedStep(3, agent="planner", input_tokens=300, output_tokens=None, started_at=_at(4), ended_at=_at(5)),
        ImportedStep(4, agent="critic", started_at=_at(6)),  # no usage recorded
    ]
    team = Trajectory(source="t.json", agent="planner", status="ok", steps=steps, input_tokens=600,
                      output_tokens=30, cost_usd=0.5, started_at=_at(0), ended_at=_at(6))
    runs = with_agent_subruns(team)
    assert runs[0] is team
    got = {r.agent: (r.input_tokens, r.output_tokens, r.cost_usd, r.started_at, r.ended_at) for r in runs[1:]}
    assert got == {
        "planner": (400, 10, None, _at(0), _at(5)),
        "coder": (200, 20, None, _at(2), _at(3)),
        "critic": (None, None, None, _at(6), _at(6)),
    }
    # Together the agents account for the team's tokens once, not once per agent.
    assert sum(r.input_tokens or 0 for r in runs[1:]) == team.input_tokens
