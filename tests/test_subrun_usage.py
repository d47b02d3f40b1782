"""An agent's sub-run carries its own tokens and times, and the roll-ups count each token once.

The log is the one the real ``autogen-agentchat`` 0.7.5 wrote (Magentic-One, tests/fixtures/
README.md): the Researcher's two model calls recorded 177+245 prompt and 47+14 completion tokens,
the orchestrator's none. Imported with ``looptrace import`` as a user runs it; the expected figures
are read from the file here, not from the importer.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from looptrace.tracer.cli.main import main
from looptrace.tracer.ingest.files.subruns import with_agent_subruns
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory

from .conftest import query

LOG = Path(__file__).resolve().parent / "fixtures" / "multi_agent" / "magentic_done.json"


def _recorded() -> tuple[dict[str, tuple[int, int]], dict[str, tuple[datetime, datetime]]]:
    """Per agent: the tokens its messages recorded, and the times of its first and last turn."""
    tokens: dict[str, tuple[int, int]] = {}
    times: dict[str, tuple[datetime, datetime]] = {}
    for m in json.loads(LOG.read_text())["messages"]:
        if m["source"] == "user" or m["type"] == "ToolCallExecutionEvent":
            continue
        at = datetime.fromisoformat(m["created_at"].replace("Z", "+00:00")).replace(tzinfo=None)
        first, _ = times.get(m["source"], (at, at))
        times[m["source"]] = (first, at)
        usage = m.get("models_usage") or {}
        i, o = tokens.get(m["source"], (0, 0))
        if usage:
            tokens[m["source"]] = (i + usage["prompt_tokens"], o + usage["completion_tokens"])
    return tokens, times


def test_subruns_carry_their_own_usage_and_times_and_the_rollups_count_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert main(["import", str(LOG), "--db", str(db)]) == 0
    tokens, times = _recorded()
    assert set(tokens) == {"Researcher"} and tokens["Researcher"] == (422, 61)  # what the file holds

    rows = query(db, "SELECT agent, parent_run_id IS NULL, input_tokens, output_tokens, started_at, ended_at "
                     "FROM runs ORDER BY parent_run_id NULLS FIRST, agent")
    team, *subs = rows
    assert team[1] and (team[2], team[3]) == (422, 61)  # the team's run: every turn
    by_agent = {agent: (i, o, s, e) for agent, _, i, o, s, e in subs}
    assert set(by_agent) == {"MagenticOneOrchestrator", "Researcher"}
    assert by_agent["Researcher"][:2] == (422, 61)
    assert by_agent["MagenticOneOrchestrator"][:2] == (None, None)  # it recorded none: unknown, not the team's
    for agent, (_, _, started, ended) in by_agent.items():
        assert (started, ended) == times[agent], agent
    assert team[4:] == (min(t[0] for t in times.values()), max(t[1] for t in times.values()))

    rollup = query(db, "SELECT agent, runs, input_tokens, output_tokens FROM usage_by_agent ORDER BY agent")
    assert rollup == [("MagenticOneOrchestrator", 2, None, None), ("Researcher", 1, 422, 61)]
    assert query(db, "SELECT sum(input_tokens), sum(output_tokens) FROM usage_by_model") == [(422, 61)]
    assert query(db, "SELECT sum(tokens) FROM usage_by_day") == [(483,)]


def test_the_report_index_counts_the_teams_tokens_once(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert main(["import", str(LOG), "--db", str(db)]) == 0
    out = tmp_path / "report"
    assert main(["report", "--all", "--db", str(db), "-o", str(out)]) == 0
    words = " ".join(re.sub(r"<[^>]+>", " ", (out / "index.html").read_text()).split())
    # The roll-ups: 422 + 61 tokens once (before: 1,266 + 183, the team's tokens once per run).
    assert "By agent agent runs unpriced_runs input_tokens output_tokens tokens cost_usd " \
           "Researcher 1 1 422 61 483 unknown MagenticOneOrchestrator 2 2 — — — unknown" in words
    assert "By model model runs unpriced_runs input_tokens output_tokens tokens cost_usd (none) 3 3 422 61 483" in words


# The pure function, with trajectories built inline.
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
