"""Logs written by the real ``crewai`` 1.15.30 and ``autogen-agentchat`` 0.7.5 (Magentic-One), imported.

The files in tests/fixtures/multi_agent/ were written by those packages in scratch venvs, driven by
the scripted model on loopback (tests/fixtures/README.md says how, and why they cannot run here).
Each file is one team run with a sub-run per agent under it; each step names its agent; the end
labels come from what the packages recorded, and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store

from .conftest import query

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "multi_agent"

# file -> (team run's status, its primary label, {agent: (sub-run status, its primary label)})
EXPECTED = {
    "magentic_done.json": ("ok", "ok", {"MagenticOneOrchestrator": ("ok", "ok"), "Researcher": ("ok", "ok")}),
    # the forced FINAL ANSWER after AgentChat's "Max rounds reached." stop is a cap, not an answer
    "magentic_cap.json": ("ok", "cap_hit", {"MagenticOneOrchestrator": ("ok", "cap_hit"),
                                            "Researcher": ("ok", "cap_hit")}),
    "magentic_loop.json": ("ok", "stagnation", {"MagenticOneOrchestrator": ("ok", "cap_hit"),
                                                "Researcher": ("ok", "stagnation")}),
    "magentic_crash.json": ("error", "error", {"MagenticOneOrchestrator": ("error", "error"),
                                               "Researcher": ("error", "error")}),
    "crewai_done.log.json": ("ok", "ok", {"Researcher": ("ok", "ok"), "Writer": ("ok", "ok")}),
    # CrewAI logs a max_iter forced answer as an ordinary completion: nothing records the cap
    "crewai_cap.log.json": ("ok", "ok", {"Researcher": ("ok", "ok"), "Writer": ("ok", "ok")}),
    # the Writer's task raised; the log stops after its "started" entry
    "crewai_crash.log.json": ("incomplete", "incomplete", {"Researcher": ("ok", "ok"),
                                                           "Writer": ("incomplete", "incomplete")}),
}

RUNS_SQL = """
SELECT r.run_id, r.source, r.agent, r.status, r.parent_run_id, d.label
FROM runs r LEFT JOIN diagnoses d ON d.run_id = r.run_id AND d.is_primary
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ma") / "s.duckdb"
    report = import_paths(Store(path), [FIXTURES])
    assert (report.skipped, report.runs_without_steps) == ([], 0)
    assert report.runs_imported == sum(1 + len(agents) for *_, agents in EXPECTED.values())
    analyze_store(Store(path))
    return path


@pytest.mark.parametrize("name", list(EXPECTED))
def test_team_run_and_agent_subruns_with_their_ends(db: Path, name: str) -> None:
    rows = [r for r in query(db, RUNS_SQL) if Path(r[1]).name == name]
    (team,) = [r for r in rows if r[4] is None]
    subs = {agent: (status, label) for _, _, agent, status, parent, label in rows if parent is not None}
    assert all(r[4] == team[0] for r in rows if r[4] is not None), "every sub-run hangs under the team's run"
    status, label, agents = EXPECTED[name]
    assert (team[3], team[5]) == (status, label)
    assert subs == agents


def _agents(db: Path, run_id: str) -> list[str]:
    return [json.loads(e)[0]["attributes"]["agent"] for (e,) in query(
        db, "SELECT CAST(events AS VARCHAR) FROM steps WHERE run_id = ? ORDER BY step", [run_id])]


def test_each_turn_is_a_step_naming_its_agent_and_subruns_hold_their_agents_turns(db: Path) -> None:
    rows = [r for r in query(db, RUNS_SQL) if Path(r[1]).name == "magentic_done.json"]
    team = next(r[0] for r in rows if r[4] is None)
    assert _agents(db, team) == ["MagenticOneOrchestrator", "MagenticOneOrchestrator", "Researcher", "Researcher",
                                 "MagenticOneOrchestrator"]
    researcher = next(r[0] for r in rows if r[4] is not None and r[2] == "Researcher")
    assert _agents(db, researcher) == ["Researcher", "Researcher"]
    calls = query(db, "SELECT step, tool, CAST(args AS VARCHAR), observation, is_error FROM tool_calls "
                      "WHERE run_id = ? ORDER BY step", [researcher])
    assert [(s, t, json.loads(a), o, e) for s, t, a, o, e in calls] == [(1, "lookup", {"query": "6 * 7"}, "42", False)]
    (answer,) = query(db, "SELECT answer FROM runs WHERE run_id = ?", [team])[0]
    assert answer == "FINAL ANSWER: 42"


def test_crewai_tasks_are_steps_of_their_agents(db: Path) -> None:
    rows = [r for r in query(db, RUNS_SQL) if Path(r[1]).name == "crewai_done.log.json"]
    team = next(r[0] for r in rows if r[4] is None)
    assert _agents(db, team) == ["Researcher", "Writer"]
    thoughts = [t for (t,) in query(db, "SELECT thought FROM steps WHERE run_id = ? ORDER BY step", [team])]
    assert thoughts == ["The answer is 42.", "Report: the answer is 42."]
