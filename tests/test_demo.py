"""The bundled demo: every scenario ends as it should, and the store it leaves reads well."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from looptrace.loop.demo import run_scenarios
from looptrace.loop.result import RunResult
from looptrace.loop.scenarios import SCENARIOS, Scenario

from .conftest import python_env, query


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[Scenario, RunResult]]]:
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    return db, run_scenarios(db)


def test_every_scenario_ends_as_expected(demo: tuple[Path, list[tuple[Scenario, RunResult]]]) -> None:
    db, results = demo
    assert [s.name for s, _ in results] == [s.name for s in SCENARIOS]
    assert [(s.name, r.status) for s, r in results] == [(s.name, s.expect) for s, _ in results]
    stored = dict(query(db, "SELECT run_id, status FROM runs"))
    assert [stored[r.run_id] for _, r in results] == [s.expect for s, _ in results]


def test_the_store_holds_every_kind_of_ending(demo: tuple[Path, list[tuple[Scenario, RunResult]]]) -> None:
    db, _ = demo
    counts = dict(query(db, "SELECT status, count(*) FROM runs GROUP BY status"))
    assert {"ok", "max_iters", "budget_exceeded", "stagnated", "context_overflow"} <= set(counts)
    assert sum(counts.values()) == len(SCENARIOS) + 2  # the orchestrator's two workers


def test_every_tool_call_step_has_its_arguments_and_observation(
    demo: tuple[Path, list[tuple[Scenario, RunResult]]],
) -> None:
    db, _ = demo
    assert query(db, "SELECT count(*) FROM steps WHERE tool IS NOT NULL") != [(0,)]
    assert query(db, """SELECT run_id, step, call_index FROM steps
                        WHERE tool IS NOT NULL AND (args IS NULL OR observation IS NULL)""") == []
    # A step with neither is one whose model call failed (the context-overflow scenario's last step).
    assert query(db, """SELECT s.run_id, s.step FROM steps s
                        WHERE s.thought IS NULL AND s.tool IS NULL AND NOT EXISTS (
                            SELECT 1 FROM llm_calls l WHERE l.run_id = s.run_id AND l.step = s.step
                            AND l.error IS NOT NULL)""") == []


def test_the_orchestrator_has_two_children(demo: tuple[Path, list[tuple[Scenario, RunResult]]]) -> None:
    db, results = demo
    [orchestrator] = [r for s, r in results if s.name == "orchestrator"]
    children = query(db, "SELECT task, status FROM runs WHERE parent_run_id = ? ORDER BY task",
                     [orchestrator.run_id])
    [scenario] = [s for s in SCENARIOS if s.name == "orchestrator"]
    assert children == [(task, "ok") for task in sorted(scenario.workers)]


@pytest.mark.slow
def test_looptrace_demo_command_diagnoses_its_runs_and_says_when_it_adds_a_second_batch(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"

    def demo() -> str:
        done = subprocess.run([sys.executable, "-m", "looptrace.tracer.cli", "demo", "--db", str(db)],
                              env=python_env(), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    first = demo()
    n = len(SCENARIOS) + 2  # the orchestrator's two workers
    assert first.splitlines()[0].startswith(f"Running {len(SCENARIOS)} scenarios offline")
    assert f"{len(SCENARIOS)} runs in" in first and "already holds" not in first
    assert f'sql --db {db} "SELECT status, count(*) FROM runs GROUP BY status"' in first
    # The summary names each run (a prefix every command takes) and its diagnosis beside its status.
    [(cycle,)] = query(db, "SELECT run_id FROM runs WHERE agent = 'demo-cycle'")
    assert f"replay {cycle[:12]} --db {db} --max-iters 4" in first
    [invalid] = [line for line in first.splitlines() if " demo-invalid-args " in line]
    assert invalid.split()[:4] == [invalid.split()[0], "demo-invalid-args", "ok", "hallucinated_tool"]
    assert "expected" not in first  # no scenario ended otherwise
    assert query(db, "SELECT count(*) FROM runs") == [(n,)]
    # Diagnosed as they landed: no `looptrace analyze` needed before `looptrace view`.
    assert f"diagnosed {n} runs: " in first
    assert query(db, "SELECT count(*) FROM runs WHERE status = 'ok' AND run_id NOT IN "
                     "(SELECT run_id FROM diagnoses)") == [(0,)]
    [(stagnated,)] = query(db, "SELECT run_id FROM runs WHERE agent = 'demo-stagnation'")
    assert query(db, "SELECT label FROM diagnoses WHERE run_id = ? AND is_primary", [stagnated]) == [("stagnation",)]
    first_analysed = query(db, "SELECT run_id, label, analyzed_at FROM diagnoses ORDER BY ALL")

    second = demo()
    assert f"{db} already holds {n} demo runs: adding a second batch" in second
    assert f"({2 * n} demo runs in {db} now)" in second
    table = second[second.index("\nrun "):second.index(f"{len(SCENARIOS)} runs in")]
    assert sum(line.split()[1:2] != [] and line.split()[1].startswith("demo-")
               for line in table.splitlines()) == len(SCENARIOS)  # this batch only
    assert query(db, "SELECT count(*) FROM runs") == [(2 * n,)]
    # Incremental: the second batch is diagnosed, the first one's diagnoses are left as they were.
    assert f"diagnosed {n} runs: " in second
    after = query(db, "SELECT run_id, label, analyzed_at FROM diagnoses ORDER BY ALL")
    assert set(first_analysed) < set(after)
