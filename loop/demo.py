"""``looptrace demo``: every bundled scenario through the real loop, SDK and local server, offline."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from looptrace.tracer import Tracing
from looptrace.tracer.store import Store
from looptrace.tracer.cli.table import format_table

from .agent import Agent
from .model import AnthropicModel, RetryPolicy
from .result import RunResult
from .scenarios import SCENARIOS, Scenario, conversations, make_sandbox
from .scripted import SCRIPTED_MODEL, Script
from .server import MessagesServer
from .subagents import subagents
from .workspace import workspace_tools

__all__ = ["run_scenarios", "main"]

# Large enough that a careless read really floods the context; the loop's trimming is the defence.
TOOL_RESULT_CAP = 400_000

SUMMARY_SQL = """
SELECT r.agent, r.task, r.status, r.n_steps AS steps, r.input_tokens + r.output_tokens AS tokens,
       round(r.cost_usd, 4) AS cost_usd, (SELECT count(*) FROM runs c WHERE c.parent_run_id = r.run_id) AS children
FROM runs r WHERE r.parent_run_id IS NULL ORDER BY r.started_at
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
                    progress.write(f"{result.status} in {result.steps} steps, "
                                   f"{time.perf_counter() - started:.2f}s{mark}\n")
        return results


def main(db: str, out: TextIO = sys.stdout) -> int:
    started = time.perf_counter()
    out.write(f"Running {len(SCENARIOS)} scenarios offline (scripted model on 127.0.0.1) into {db}\n")
    results = run_scenarios(db, progress=out)
    with Store(db).reader() as conn:
        cursor = conn.execute(SUMMARY_SQL)
        columns = [d[0] for d in cursor.description or []]
        out.write("\n" + format_table(columns, cursor.fetchall(), max_cell=44) + "\n")
    wrong = [(s.name, r.status, s.expect) for s, r in results if r.status != s.expect]
    out.write(f"\n{len(results)} runs in {time.perf_counter() - started:.1f}s. Next:\n"
              f"  looptrace view {db}\n"
              f"  looptrace analyze --db {db}\n"
              f"  looptrace sql --db {db} \"SELECT status, count(*) FROM runs GROUP BY status\"\n"
              f"  looptrace replay RUN_ID --db {db} --max-iters 4\n")
    for name, got, expected in wrong:
        out.write(f"scenario {name} ended {got}, expected {expected}\n")
    return 1 if wrong else 0
