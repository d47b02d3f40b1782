"""Replaying a 200-step recorded run (load the recording, re-run the loop on recorded responses and
tool results, verify every request), side by side with recording it: the same loop against the
scripted model on the local server, with its real tools."""

from __future__ import annotations

import time
from pathlib import Path

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel
from looptrace.loop.policy import Policy
from looptrace.loop.scenarios import make_sandbox
from looptrace.loop.scripted import Script, act, finish
from looptrace.loop.server import MessagesServer
from looptrace.loop.workspace import workspace_tools
from looptrace.replay.recording import load_recording
from looptrace.replay.replayer import replay
from looptrace.tracer import Tracing
from looptrace.tracer.store import Store

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "replay: a 200-step recorded run, replayed and verified"
GOAL_S = 2.0
TASK = "Read the log in slices."


def run(quick: bool = False) -> list[Result]:
    steps = 50 if quick else 200
    script = [act("read_file", {"path": "data/server.log", "offset": 1 + 20 * i, "limit": 20}) for i in range(steps - 1)]
    script.append(finish("done"))
    policy = Policy(max_iters=steps + 5)
    with scratch_dir("looptrace-bench-replay-") as tmp:
        root = make_sandbox(Path(tmp) / "ws")
        db = Path(tmp) / "store.duckdb"
        run_ids: list[str] = []

        def record() -> float:
            with MessagesServer(Script({TASK: list(script)})) as server, Tracing(db) as tracing:
                agent = Agent(AnthropicModel("scripted", base_url=server.base_url, api_key="x"),
                              workspace_tools(root), tracing, policy=policy)
                started = time.perf_counter()
                result = agent.run(TASK)
                elapsed = time.perf_counter() - started
            run_ids.append(result.run_id)
            return elapsed

        record()  # the recording to replay

        def replay_once() -> float:
            started = time.perf_counter()
            recording = load_recording(Store(db), run_ids[0])
            with Tracing(db) as tracing:
                report = replay(recording, tracing)
            elapsed = time.perf_counter() - started
            assert report.identical, report.lines()
            return elapsed

        a, b = alternate(1 if quick else 3, replay_once, record)
    return [Result(f"{steps}-step run", "s", median(a), median(b), f"replay < {GOAL_S:.0f} s",
                   median(a) < GOAL_S, note="baseline: recording the same run live against the local server")]
