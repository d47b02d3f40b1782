"""``looptrace demo``: every bundled scenario through the real loop, SDK and local server, offline.

Into a store that already holds demo runs, the demo adds a second batch and says so, rather than
deleting anything: the file may hold the user's own runs too, and a store never loses data behind
the user's back. The summary shows this batch only; the new runs are diagnosed as they land
(``looptrace.tracer.on_stored``), so ``looptrace view`` shows diagnoses straight away.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from looptrace.tracer import Tracing
from looptrace.tracer.cli.table import format_table
from looptrace.tracer.cli.plural import count
from looptrace.tracer.cli.program import program
from looptrace.tracer.on_stored import notify_stored
from looptrace.tracer.store import Store, StoreError

from .agent import Agent
from .model import AnthropicModel, RetryPolicy
from .result import RunResult
from .scenarios import SCENARIOS, Scenario, conversations, make_sandbox
from .scripted import SCRIPTED_MODEL, Script
from .server import MessagesServer
from .subagents import subagents
from .workspace import workspace_tools

__all__ = ["run_scenarios", "main", "demo_run_ids"]

# Large enough that a careless read really floods the context; the loop's trimming is the defence.
TOOL_RESULT_CAP = 400_000

# The run id's first 12 characters (every command takes a prefix), and the primary diagnosis beside
# the status: the status is how the run ended, the diagnosis what looptrace makes of it (an `ok` run
# can have recovered from invented arguments).
SUMMARY_SQL = """
SELECT left(r.run_id, 12) AS run, r.agent, r.status, d.label AS diagnosis, r.n_steps AS steps,
       r.input_tokens + r.output_tokens AS tokens, round(r.cost_usd, 4) AS cost_usd,
       (SELECT count(*) FROM runs c WHERE c.parent_run_id = r.run_id) AS children
FROM runs r LEFT JOIN diagnoses d ON d.run_id = r.run_id AND d.is_primary
WHERE r.parent_run_id IS NULL AND r.run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY r.started_at
"""

# The run the replay hint names: the cycling run, where a tighter cap shows what it would save.
HINT_RUN_SQL = "SELECT run_id FROM runs WHERE agent = 'demo-cycle' AND run_id IN (SELECT unnest(?::VARCHAR[]))"

# Every demo agent is named demo-<scenario>; sub-agents hang under their orchestrator.
DEMO_RUNS_SQL = """
SELECT run_id FROM runs WHERE agent LIKE 'demo-%' OR parent_run_id IN (SELECT run_id FROM runs WHERE agent LIKE 'demo-%')
"""


def run_scenarios(
    db: str | Path, scenarios: Sequence[Scenario] = SCENARIOS, *, workspace: Path | None = None,
    progress: TextIO | None = None,
) -> list[tuple[Scenario, RunResult]]:
    with tempfile.TemporaryDirectory(prefix="looptrace-demo-") as tmp:
        root = make_sandbox(workspace or Path(tmp))
        tools = workspace_tools(root, max_result_bytes=TOOL_RESULT_CAP)
        results: list[tuple[Scenario, RunResult]] = []
        with MessagesServer(Script(conversations(scenarios))) as server, Tracing(db) as tracing:
            model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="offline-demo",
                                   retry=RetryPolicy(base_delay=0.02, max_delay=0.2))
            for i, scenario in enumerate(scenarios, 1):
                if progress:
                    progress.write(f"[{i:2d}/{len(scenarios)}] {scenario.name:<20} {scenario.description} ... ")
                    progress.flush()
                agent = Agent(model, tools, tracing, policy=scenario.policy, name=f"demo-{scenario.name}")
                if scenario.workers:
                    agent.tool_factories = [subagents(agent)]
                started = time.perf_counter()
                result = agent.run(scenario.task)
                results.append((scenario, result))
                if progress:
                    mark = "" if result.status == scenario.expect else f"  (expected {scenario.expect}!)"
                    progress.write(f"{result.status} in {count(result.steps, 'step')}, "
                                   f"{time.perf_counter() - started:.2f}s{mark}\n")
        return results


def demo_run_ids(db: str | Path) -> set[str]:
    """The demo's runs (and their sub-agents' runs) already in ``db``; none if there is no store yet."""
    if not Path(db).exists():
        return set()
    try:
        with Store(db).reader() as conn:
            return {r[0] for r in conn.execute(DEMO_RUNS_SQL).fetchall()}
    except StoreError:
        return set()  # not a store: Tracing reports that in one line when it opens it


def main(db: str, out: TextIO = sys.stdout) -> int:
    started = time.perf_counter()
    before = demo_run_ids(db)
    if before:
        out.write(f"{db} already holds {len(before)} demo runs: adding a second batch beside them "
                  f"(delete {db} first for a fresh start)\n")
    out.flush()
    results = run_scenarios(db, progress=out)
    batch = sorted(demo_run_ids(db) - before)
    notify_stored(db, batch, out=out)  # first, so the summary shows each run's diagnosis
    with Store(db).reader() as conn:
        cursor = conn.execute(SUMMARY_SQL, [batch])
        columns = [d[0] for d in cursor.description or []]
        out.write("\n" + format_table(columns, cursor.fetchall(), max_cell=44) + "\n")
        hint = conn.execute(HINT_RUN_SQL, [batch]).fetchone()
    out.flush()
    wrong = [(s.name, r.status, s.expect) for s, r in results if r.status != s.expect]
    total = len(before) + len(batch)
    # Each hint runs when pasted whole: the program as it was started, the store quoted, comments after `#`.
    lt, q = program(), shlex.quote(db)
    out.write(f"\n{count(len(results), 'run')} in {time.perf_counter() - started:.1f}s"
              + (f" ({total} demo runs in {db} now)" if before else "") + ". Next:\n"
              f"  {lt} view {q}\n"
              f"  {lt} sql --db {q} \"SELECT status, count(*) FROM runs GROUP BY status\"\n"
              + (f"  {lt} replay {hint[0][:12]} --db {q} --max-iters 4   # the demo-cycle run under a tighter cap\n"
                 if hint else "")
              + f"  {lt} analyze --db {q} --help   # re-analyse with other thresholds\n")
    for name, got, expected in wrong:
        out.write(f"scenario {name} ended {got}, expected {expected}\n")
    return 1 if wrong else 0
