"""Replay, what-if, fork, resume, diff and exported regression tests, over runs of the real demo.

The demo scenarios are recorded once per module (``run_scenarios``, the real loop, SDK and local
server); every test then replays those recordings through the real loop into the same store, so
replays and forks sit beside the runs they link to, as they do for a user. Tests that damage a store
work on a copy of it. Subprocess tests (the CLI, a killed agent, pytest on an exported test) are
marked slow.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looptrace.loop.demo import run_scenarios
from looptrace.loop.model import AnthropicModel
from looptrace.loop.result import RunResult
from looptrace.loop.scenarios import SCENARIOS, make_sandbox
from looptrace.loop.scripted import SCRIPTED_MODEL, Script, act, finish
from looptrace.loop.server import MessagesServer
from looptrace.loop.workspace import workspace_tools
from looptrace.replay.cassette import CASSETTE_VERSION, load_cassette, save_cassette
from looptrace.replay import diff as diff_module
from looptrace.replay.diff import Aligned, StepFacts, align, diff_runs, load_step_facts
from looptrace.replay.recording import Recording, RecordingError, load_recording
from looptrace.replay.regression import export_test
from looptrace.replay.replayer import ReplayReport, replay
from looptrace.tracer.ingest.files.importing import write_trajectories
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
from looptrace.tracer import Tracing
from looptrace.tracer.cli.main import main as cli_main
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query
from .test_manual_api import example_agent

SCENARIO_NAMES = [s.name for s in SCENARIOS]


@dataclass(frozen=True)
class Demo:
    db: Path
    runs: dict[str, RunResult]  # by scenario name

    def run_id(self, name: str) -> str:
        return self.runs[name].run_id

    def recording(self, name: str) -> Recording:
        return load_recording(Store(self.db), self.run_id(name))

    def copy(self, dest: Path) -> Path:
        """A copy of the store (compacted first, so the DuckDB file holds everything)."""
        Store(self.db).compact()
        shutil.copy(self.db, dest)
        return dest


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    db = tmp_path_factory.mktemp("replay") / "demo.duckdb"
    return Demo(db, {s.name: r for s, r in run_scenarios(db)})


def replay_into(db: Path, recording: Recording, **kwargs: Any) -> ReplayReport:
    with Tracing(db) as tracing:
        return replay(recording, tracing, **kwargs)


def cli_env() -> dict[str, str]:
    """``python_env()`` without an API key, so no command can reach the real API."""
    return {k: v for k, v in python_env().items() if k != "ANTHROPIC_API_KEY"}


def looptrace(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True, env=cli_env(),
                          cwd=ROOT, timeout=timeout)


@dataclass(frozen=True)
class Stored:
    """A run as the store's views show it, with its steps' actions."""

    status: str
    n_steps: int
    replay_of: str | None
    forked_from: str | None
    fork_step: int | None
    strategy: str | None
    answer: str | None
    tokens: int
    cost_usd: float
    actions: list[tuple[Any, ...]]  # (step, tool, args, observation)


STORED_SQL = ("SELECT status, n_steps, replay_of, forked_from, fork_step, strategy, answer, "
              "input_tokens + output_tokens, cost_usd FROM runs WHERE run_id = ?")
ACTIONS_SQL = "SELECT step, tool, args, observation FROM steps WHERE run_id = ? ORDER BY step, call_index"


def stored(db: Path, *run_ids: str) -> list[Stored]:
    # No absorb: the session reads pending segments anyway, and compacting on every check is slow.
    with Store(db).reader(locked_down=False, absorb=False) as conn:
        out = []
        for run_id in run_ids:
            [row] = conn.execute(STORED_SQL, [run_id]).fetchall()
            out.append(Stored(*row, actions=conn.execute(ACTIONS_SQL, [run_id]).fetchall()))
        return out


# -- every recorded run replays identically ----------------------------------------------------------


def test_the_top_level_runs_are_the_scenarios(demo: Demo) -> None:
    top = query(demo.db, "SELECT run_id FROM runs WHERE parent_run_id IS NULL AND replay_of IS NULL "
                         "AND forked_from IS NULL")
    assert sorted(r[0] for r in top) == sorted(demo.run_id(name) for name in SCENARIO_NAMES)


@pytest.mark.parametrize("name", SCENARIO_NAMES)
def test_every_demo_run_replays_identically_as_a_linked_run(demo: Demo, name: str) -> None:
    recording = demo.recording(name)
    report = replay_into(demo.db, recording)
    original = demo.runs[name]
    assert report.model.drift is None, report.model.drift
    assert report.identical
    assert (report.result.status, report.result.steps) == (original.status, original.steps)
    assert report.result.answer == original.answer
    assert report.lines()[1:] == [f"identical through step {original.steps}"]
    replayed, recorded = stored(demo.db, report.result.run_id, original.run_id)
    assert replayed.replay_of == original.run_id and replayed.forked_from is None
    assert (replayed.status, replayed.n_steps) == (original.status, original.steps)
    assert replayed.strategy == "replay"
    # Recorded tool results were served: the replay's steps are the original's, observation for observation.
    assert replayed.actions == recorded.actions


# -- drift ---------------------------------------------------------------------------------------------


def test_a_changed_system_prompt_drifts_at_step_1(demo: Demo) -> None:
    report = replay_into(demo.db, demo.recording("healthy"), system="Be terse.")
    assert not report.identical
    assert report.model.drift_step == 1
    assert report.model.drift is not None and report.model.drift.startswith("the system prompt changed")
    assert '+"Be terse."' in report.model.drift
    lines = report.lines()
    assert lines[1].startswith("drift at step 1: the system prompt changed")
    assert lines[-1].startswith("diverged at step 1: needs a live model")
    assert report.result.status == "error" and report.result.steps == 1


@pytest.mark.parametrize("edited_step", [1, 2])
def test_a_changed_tool_result_drifts_at_the_following_step(demo: Demo, edited_step: int) -> None:
    recording = demo.recording("healthy")
    [i] = [i for i, t in enumerate(recording.tools) if t.step == edited_step]
    tools = list(recording.tools)
    tools[i] = dataclasses.replace(tools[i], observation="Deploy is cancelled.")
    report = replay_into(demo.db, dataclasses.replace(recording, tools=tools))
    assert report.model.drift_step == edited_step + 1
    drift = report.model.drift or ""
    # The edited result is the last message of the next request: user, then (assistant, user) per step.
    assert drift.startswith(f"message {2 * edited_step + 1} (user) changed")
    assert '+   "content": "Deploy is cancelled."' in drift
    assert report.lines()[-1].startswith(f"diverged at step {edited_step + 1}: needs a live model")


# -- what-if -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "changes", "status", "stopped_at"),
    [
        ("stagnation", {"max_iters": 4}, "max_iters", 4),
        ("stagnation", {"stagnation_window": 2, "max_reflections": 0}, "stagnated", 2),
        ("budget", {"budget_usd": 0.2}, "budget_exceeded", 1),
    ],
)
def test_a_tighter_policy_stops_earlier_and_reports_the_savings(
    demo: Demo, name: str, changes: dict[str, Any], status: str, stopped_at: int,
) -> None:
    original = demo.runs[name]
    if name == "stagnation":
        assert (original.steps, original.reflections) == (9, 2)
    report = replay_into(demo.db, demo.recording(name), policy_changes=changes)
    assert report.model.drift is None
    assert (report.result.status, report.result.steps) == (status, stopped_at)
    before, after = stored(demo.db, original.run_id, report.result.run_id)
    assert after.replay_of == original.run_id and after.n_steps == stopped_at
    assert before.tokens > after.tokens > 0
    label = ", ".join(f"{k}={v}" for k, v in changes.items())
    assert report.lines()[1:] == [
        f"identical through step {stopped_at}",
        f"what-if {label}: the run would have stopped with {status} at step {stopped_at}; "
        f"saved {original.steps - stopped_at} steps, {before.tokens - after.tokens} tokens, "
        f"${before.cost_usd - after.cost_usd:.4f}",
    ]


def test_trimming_observations_the_recording_did_not_trim_needs_a_live_model(demo: Demo) -> None:
    run_id = demo.run_id("context-overflow")
    [(first_big,)] = query(demo.db, "SELECT min(step) FROM tool_calls WHERE run_id = ? "
                                    "AND observation_bytes > 1000", [run_id])
    report = replay_into(demo.db, demo.recording("context-overflow"),
                         policy_changes={"max_observation_bytes": 1000})
    assert report.model.drift_step == first_big + 1
    assert report.lines()[-1].startswith(f"diverged at step {first_big + 1}: needs a live model")
    assert not any(line.startswith("what-if") for line in report.lines())


def test_a_looser_policy_that_outruns_the_recording_says_it_needs_a_live_model(demo: Demo) -> None:
    report = replay_into(demo.db, demo.recording("max-iters"), policy_changes={"max_iters": 10})
    assert "the recording ends after 6 model calls" in (report.result.error or "")
    last = report.lines()[-1]
    assert "needs a live model" in last and "saved -" not in last


def test_the_replay_command_runs_a_what_if(demo: Demo, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = demo.run_id("stagnation")
    assert cli_main(["replay", run_id[:10], "--db", str(demo.db), "--max-iters", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"replayed run {run_id} as ") and out[0].endswith(
        "max_iters after 4 steps (recorded: stagnated after 9 steps)")
    assert out[-1].startswith("what-if max_iters=4: the run would have stopped with max_iters at step 4; "
                              "saved 5 steps")


# -- fork ----------------------------------------------------------------------------------------------

FORK_TASK = next(s.task for s in SCENARIOS if s.name == "max-iters")
FORK_LIVE = [act("search", {"pattern": "Risk"}, "The risks matter more than the code."),
             finish("The payment API rate limit is the risk.")]


@dataclass(frozen=True)
class Fork:
    original: str
    report: ReplayReport
    requests: list[dict[str, Any]]  # what the live server received

    @property
    def run_id(self) -> str:
        return self.report.result.run_id


@pytest.fixture(scope="module")
def fork(demo: Demo, tmp_path_factory: pytest.TempPathFactory) -> Fork:
    """The demo max-iters run (6 reads and searches, never done) forked at step 3 with a live script."""
    sandbox = make_sandbox(tmp_path_factory.mktemp("sandbox"))
    recording = demo.recording("max-iters")
    with MessagesServer(Script({FORK_TASK: FORK_LIVE})) as server:
        model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="offline")
        report = replay_into(demo.db, recording, fork_at_step=3, live_model=model,
                             live_tools=workspace_tools(sandbox))
    return Fork(recording.run_id, report, list(server.requests))


def test_a_fork_replays_steps_before_it_and_continues_live(demo: Demo, fork: Fork) -> None:
    # The live server saw steps 3 and 4 only: step 3's request already holds steps 1-2 (5 messages).
    assert [len(r["body"]["messages"]) for r in fork.requests] == [5, 7]
    assert fork.report.model.live_from_step == 3
    assert fork.report.lines()[1:] == ["continued with the live model from step 3"]
    assert (fork.report.result.status, fork.report.result.steps) == ("ok", 4)
    ours, theirs = stored(demo.db, fork.run_id, fork.original)
    assert (ours.forked_from, ours.fork_step, ours.replay_of) == (fork.original, 3, None)
    assert (ours.status, ours.n_steps, ours.strategy) == ("ok", 4, "fork")
    assert ours.answer == "The payment API rate limit is the risk."
    assert ours.actions[:2] == theirs.actions[:2]
    # Step 3 ran the live search over the sandbox.
    assert ours.actions[2][1:] == ("search", '{"pattern":"Risk"}',
                                   "notes.txt:3: Risk: the payment API rate limits.")


def test_a_forks_live_steps_run_tools_live_even_when_the_recording_has_the_same_call(
    demo: Demo, tmp_path: Path,
) -> None:
    sandbox = make_sandbox(tmp_path)
    (sandbox / "notes.txt").write_text("Deploy moved to 2027-01-10.\n")
    # The recording reads notes.txt at step 4; the live model reads it at step 3.
    live = [act("read_file", {"path": "notes.txt"}), finish("2027-01-10")]
    with MessagesServer(Script({FORK_TASK: live})) as server:
        model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="offline")
        report = replay_into(demo.db, demo.recording("max-iters"), fork_at_step=3, live_model=model,
                             live_tools=workspace_tools(sandbox))
    [forked] = stored(demo.db, report.result.run_id)
    step3 = forked.actions[2]
    assert step3[1] == "read_file" and "2027-01-10" in step3[3], step3[3]


@pytest.mark.slow
def test_the_fork_command_prints_the_fork_summary(demo: Demo, tmp_path: Path) -> None:
    sandbox = make_sandbox(tmp_path)
    original = demo.run_id("max-iters")
    with MessagesServer(Script({FORK_TASK: FORK_LIVE})) as server:
        done = looptrace("fork", original[:8], "--at", "3", "--base-url", server.base_url, "--workspace",
                         str(sandbox), "--db", str(demo.db))
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.splitlines()
    match = re.fullmatch(rf"replayed run {original} as (\w+): ok after 4 steps "
                         r"\(recorded: max_iters after 6 steps\)", first)
    assert match, first
    assert second == "continued with the live model from step 3"
    assert len(server.requests) == 2
    [forked] = stored(demo.db, match.group(1))
    assert (forked.forked_from, forked.fork_step, forked.status) == (original, 3, "ok")


# -- diff ----------------------------------------------------------------------------------------------


def test_the_diff_of_a_run_and_its_fork_points_at_the_fork_step(demo: Demo, fork: Fork) -> None:
    with Store(demo.db).reader() as conn:
        a, b = load_step_facts(conn, fork.original), load_step_facts(conn, fork.run_id)
    assert [f.step for f in a] == [1, 2, 3, 4, 5, 6] and [f.step for f in b] == [1, 2, 3, 4]
    d = diff_runs(a, b)
    assert d.first_divergence == 2 and d.common == 2
    pair = d.pairs[d.first_divergence]
    assert {f.step for f in (pair.a, pair.b) if f is not None} == {3}
    assert [p.same for p in d.pairs[:2]] == [True, True]
    assert b[2].action == 'search {"pattern":"Risk"}'


def test_the_diff_command_names_the_fork_step(
    demo: Demo, fork: Fork, capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main(["diff", fork.original, fork.run_id[:10], "--db", str(demo.db)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^first divergent decision at step 3 of [AB]; 2 steps in common$", out, re.M), out
    rows = [line.split()[:2] for line in out.splitlines()[2:4]]
    assert rows == [["=", "1"], ["=", "2"]]  # the replayed steps are the same decisions


def _diff_lines(out: str) -> list[list[str]]:
    """The diff table's step lines split on its columns (two spaces or more)."""
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()[2:] if line[:1] and line[0] in "=-+~"]


def test_the_diff_command_shows_an_unknown_latency_as_unknown(
    demo: Demo, fork: Fork, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Runs imported from transcripts record no model call: their latency is unknown, not 0 ms, and a
    step with calls keeps its figure."""
    assert cli_main(["diff", fork.original, fork.run_id, "--db", str(demo.db)]) == 0
    latencies = [line[-1] for line in _diff_lines(capsys.readouterr().out)]
    assert latencies and all(re.fullmatch(r"-?\d+", v) for v in latencies), latencies
    db = tmp_path / "imported.duckdb"
    for name, city in (("a", "Paris"), ("b", "Rome")):
        (tmp_path / f"{name}.json").write_text(json.dumps({"messages": [
            {"role": "user", "content": f"Weather in {city}?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "weather", "arguments": json.dumps({"city": city})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            {"role": "assistant", "content": "Sunny."}]}))
    assert cli_main(["import", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--db", str(db)]) == 0
    ids = [r[0] for r in query(db, "SELECT run_id FROM runs ORDER BY task")]
    capsys.readouterr()
    assert cli_main(["diff", *ids, "--db", str(db)]) == 0
    lines = _diff_lines(capsys.readouterr().out)
    assert [line[-1] for line in lines] == ["?", "?"], lines


def facts(*actions: str) -> list[StepFacts]:
    return [StepFacts(step, action, tokens=10 * step, cost_usd=0.001 * step, latency_ms=step)
            for step, action in enumerate(actions, 1)]


def steps_of(pairs: list[Aligned]) -> list[tuple[int | None, int | None]]:
    return [(p.a.step if p.a else None, p.b.step if p.b else None) for p in pairs]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ((), (), []),
        (("x", "y"), ("x", "y"), [(1, 1), (2, 2)]),
        ((), ("x",), [(None, 1)]),
        (("x",), (), [(1, None)]),
        (("x", "z"), ("x", "y", "z"), [(1, 1), (None, 2), (2, 3)]),  # b inserted a step
        (("x", "y", "z"), ("x", "z"), [(1, 1), (2, None), (3, 2)]),  # b skipped a step
        (("x", "y", "z"), ("x", "w", "z"), [(1, 1), (2, 2), (3, 3)]),  # a different decision: side by side
        (("x", "y", "w"), ("x", "z"), [(1, 1), (2, 2), (3, None)]),  # ... the longer side's rest alone
        (("x", "y"), ("y", "x"), [(None, 1), (1, 2), (2, None)]),  # swapped: one kept in common
        (("r", "r", "r"), ("r",), [(1, 1), (2, None), (3, None)]),  # a stagnated run against a healthy one
        (("a", "b", "a", "b"), ("a", "b"), [(1, 1), (2, 2), (3, None), (4, None)]),
    ],
)
def test_align(a: tuple[str, ...], b: tuple[str, ...], expected: list[tuple[int | None, int | None]]) -> None:
    pairs = align(facts(*a), facts(*b))
    assert steps_of(pairs) == expected
    assert all(p.same == (p.a is not None and p.b is not None and p.a.action == p.b.action) for p in pairs)
    # Between two alike pairs the lines are never one-sided on both sides: what differs stands side by side.
    for before, after in zip(pairs, pairs[1:]):
        assert not (before.a is None and after.b is None) and not (before.b is None and after.a is None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("xyz"), max_size=12), st.lists(st.sampled_from("xyz"), max_size=12))
def test_align_pairs_a_longest_common_subsequence_after_trimming_the_common_ends(
    a: list[str], b: list[str]
) -> None:
    pairs = align(facts(*a), facts(*b))
    # Every step of both runs once, in order, and as many alike as the plain table finds.
    assert [p.a.step for p in pairs if p.a] == list(range(1, len(a) + 1))
    assert [p.b.step for p in pairs if p.b] == list(range(1, len(b) + 1))
    assert sum(p.same for p in pairs) == sum(p.same for p in diff_module._lcs(facts(*a), facts(*b)))


def test_align_pairs_long_different_middles_in_order_instead_of_building_a_huge_table() -> None:
    n = 1_500  # 1,500 x 1,500 > MAX_TABLE cells between the common ends
    a = facts("start", *[f"a{i}" for i in range(n)], "end")
    b = facts("start", *[f"b{i}" for i in range(n)], "end")
    pairs = align(a, b)
    assert len(pairs) == n + 2 and pairs[0].same and pairs[-1].same
    assert all(p.a is not None and p.b is not None and p.a.step == p.b.step for p in pairs)
    assert diff_runs(a, b).first_divergence == 1


@pytest.mark.parametrize(
    ("a", "b", "first", "common"),
    [
        ((), (), None, 0),
        (("x", "y"), ("x", "y"), None, 2),
        (("x", "y", "z"), ("x", "w", "z"), 1, 2),
        (("x",), ("x", "done"), 1, 1),
        (("x",), ("y",), 0, 0),
    ],
)
def test_diff_runs_first_divergence(
    a: tuple[str, ...], b: tuple[str, ...], first: int | None, common: int,
) -> None:
    d = diff_runs(facts(*a), facts(*b))
    assert (d.first_divergence, d.common) == (first, common)



@pytest.mark.parametrize(
    ("a", "b", "a_exists", "b_exists", "expected"),
    [
        (10, 25, True, True, 15),
        (None, 25, True, True, None),  # an import without token counts: unknown, not a cost of 25
        (10, None, True, True, None),
        (None, 7, False, True, 7),  # a step only B has: its own figure
        (4, None, True, False, -4),
        (0, 0, True, True, 0),
    ],
)
def test_diff_delta_keeps_unknown_figures_unknown(
    a: int | None, b: int | None, a_exists: bool, b_exists: bool, expected: int | None,
) -> None:
    assert diff_module.delta(a, b, a_exists=a_exists, b_exists=b_exists) == expected

# -- resume a killed run -------------------------------------------------------------------------------

KILLED_TASK = "Review the shop before the deploy."
# A child process: the real loop over the scripted server, whose model hangs at step 4.
KILLED_AGENT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from looptrace.loop.agent import Agent
    from looptrace.loop.model import AnthropicModel
    from looptrace.loop.replies import Reply
    from looptrace.loop.scenarios import make_sandbox
    from looptrace.loop.scripted import Script, act
    from looptrace.loop.server import MessagesServer
    from looptrace.loop.workspace import workspace_tools
    from looptrace.tracer import Tracing

    db, root, task = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    replies = [act("list_dir", {"path": "."}), act("read_file", {"path": "notes.txt"}),
               act("read_file", {"path": "README.md"}), Reply([{"type": "text", "text": "..."}], delay=60)]
    with MessagesServer(Script({task: replies})) as server:
        tracing = Tracing(db, schedule_delay_millis=50)
        model = AnthropicModel("scripted", base_url=server.base_url, api_key="offline")
        Agent(model, workspace_tools(make_sandbox(root)), tracing, name="victim").run(task)
""")


def killed_run(db: Path, workspace: Path, steps: int = 3) -> str:
    """Run KILLED_AGENT until ``steps`` steps are stored, then kill -9 it; return its run id."""
    Store(db).compact()  # create and migrate the store first, so the child only writes segments
    command = [PYTHON, "-c", KILLED_AGENT, str(db), str(workspace), KILLED_TASK]
    child = subprocess.Popen(command, env=cli_env(), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        # A deadline for a hang only: a child's start and three steps took over 30 s under load 17 (issue 39).
        deadline = time.monotonic() + 120
        while True:
            rows = query(db, "SELECT run_id, n_steps FROM runs WHERE agent = 'victim'")
            if rows and rows[0][1] >= steps:
                return str(rows[0][0])
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child never recorded its steps"
            time.sleep(0.05)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.communicate(timeout=10)


@pytest.mark.slow
def test_resume_continues_a_killed_run_from_its_last_recorded_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    db = tmp_path / "killed.duckdb"
    killed = killed_run(db, tmp_path / "workspace")
    [victim] = stored(db, killed)
    assert (victim.status, victim.n_steps) == ("incomplete", 3)
    recording = load_recording(Store(db), killed)
    assert (recording.status, [c.step for c in recording.calls]) == ("incomplete", [1, 2, 3])
    # Replaying it alone runs out of recording after step 3, and says so.
    alone = replay_into(db, recording)
    assert alone.result.status == "error"
    assert (alone.result.error or "").startswith(
        "the recording ends after 3 model calls (step 3); continuing needs a live model")

    with MessagesServer(Script({KILLED_TASK: [finish("The shop is ready to deploy.")]})) as server:
        assert cli_main(["resume", killed[:8], "--base-url", server.base_url, "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "continued with the live model from step 4"
    # The live server saw only step 4, whose request holds the three recorded steps.
    assert [len(r["body"]["messages"]) for r in server.requests] == [7]
    [(resumed,)] = query(db, "SELECT run_id FROM runs WHERE forked_from = ?", [killed])
    [after, before] = stored(db, resumed, killed)
    assert (after.fork_step, after.status, after.n_steps) == (4, "ok", 4)
    assert after.answer == "The shop is ready to deploy."
    assert after.actions[:3] == before.actions


# -- exported regression tests -------------------------------------------------------------------------


@pytest.mark.slow
def test_an_exported_test_passes_and_fails_once_its_cassette_is_edited(demo: Demo, tmp_path: Path) -> None:
    recording = demo.recording("healthy")
    intact, _ = export_test(recording, tmp_path / "test_intact.py")
    edited, cassette = export_test(recording, tmp_path / "test_edited.py")
    assert cassette == tmp_path / "test_edited.cassette.json"
    data = json.loads(cassette.read_text())
    [notes] = [t for t in data["tools"] if t["args"] == {"path": "notes.txt"}]
    notes["observation"] = "Deploy is cancelled."
    cassette.write_text(json.dumps(data))
    # One pytest process for both files (each start costs seconds); plugins are not needed.
    env = {**cli_env(), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run([PYTHON, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", intact.name,
                           edited.name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    test_name = r"::test_run_\w+_replays_the_same"
    assert re.search(rf"^PASSED {intact.name}{test_name}$", done.stdout, re.M), done.stdout
    assert re.search(rf"^FAILED {edited.name}{test_name}", done.stdout, re.M), done.stdout
    assert "message 5 (user) changed" in done.stdout  # the drift is the failure's message
    assert "1 failed, 1 passed" in done.stdout


def load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_exported_test_of_a_compacted_run_passes(demo: Demo, tmp_path: Path) -> None:
    recording = demo.recording("context-defended")
    test, cassette = export_test(recording, tmp_path / "test_compacted.py")
    # Rewrite the cassette in the recorded key order, so only the template is under test here
    # (the cassette's own key-order bug is the round-trip test's).
    cassette.write_text(json.dumps({"looptrace_cassette": CASSETTE_VERSION, **dataclasses.asdict(recording)}))
    module = load_module(test)
    (tmp_path / "run").mkdir()
    getattr(module, f"test_run_{recording.run_id[:8]}_replays_the_same")(tmp_path / "run")


@pytest.mark.parametrize("name", [
    "healthy",
    "orchestrator",
    "context-defended",
])
def test_a_cassette_round_trip_replays_identically(demo: Demo, tmp_path: Path, name: str) -> None:
    recording = demo.recording(name)
    save_cassette(recording, tmp_path / "run.cassette.json")
    loaded = load_cassette(tmp_path / "run.cassette.json")
    assert loaded == recording
    report = replay_into(tmp_path / "replay.duckdb", loaded)
    assert report.model.drift is None, report.model.drift
    assert report.identical


# -- recordings that cannot be replayed ----------------------------------------------------------------


def imported_run(db: Path, *, config: bool) -> str:
    """A run imported from another agent's trajectory: tool calls, but no model calls."""
    t = Trajectory(source="other-agent.jsonl", agent="other-agent", status="ok", task="List the files.",
                   steps=[ImportedStep(1, "Look around.", "ls", {}, "a.txt b.txt")],
                   attributes={"config": {"system": "x", "policy": {}}} if config else {})
    write_trajectories(Store(db), [t])
    return t.run_id


def without_step(demo: Demo, db: Path, name: str, step: int) -> str:
    demo.copy(db)
    with Store(db).writer() as conn:
        conn.execute("DELETE FROM llm_call_records WHERE run_id = ? AND step = ?", [demo.run_id(name), step])
    return demo.run_id(name)


def unreplayable(case: str, demo: Demo, tmp_path: Path) -> tuple[Path, str, str]:
    """(store, run id, what the error must say) for each kind of incomplete recording."""
    db = tmp_path / "store.duckdb"
    if case == "imported":
        return db, imported_run(db, config=False), "has no recorded loop configuration"
    if case == "imported-with-config":
        return db, imported_run(db, config=True), "has no recorded model calls"
    if case == "manual-api":
        example_agent(db)
        [(run_id,)] = query(db, "SELECT run_id FROM runs")
        return db, run_id, "has no recorded loop configuration"
    if case == "missing-step":
        return db, without_step(demo, db, "healthy", 2), "no model call recorded for step(s) 2"
    assert case == "unknown-run"
    return demo.db, "feedface", "no run 'feedface' in this store"


CASES = ["imported", "imported-with-config", "manual-api", "missing-step", "unknown-run"]


@pytest.mark.parametrize("case", CASES)
def test_an_incomplete_recording_is_refused_with_what_is_missing(
    demo: Demo, tmp_path: Path, case: str,
) -> None:
    db, run_id, expected = unreplayable(case, demo, tmp_path)
    with pytest.raises(RecordingError, match=re.escape(expected)):
        load_recording(Store(db), run_id)


@pytest.mark.parametrize("case", CASES)
def test_the_replay_command_refuses_it_with_an_error_line(
    demo: Demo, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str,
) -> None:
    db, run_id, expected = unreplayable(case, demo, tmp_path)
    assert cli_main(["replay", run_id, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_the_replay_command_exits_1_without_a_traceback(demo: Demo, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    run_id = without_step(demo, db, "healthy", 2)
    done = looptrace("replay", run_id[:12], "--db", str(db))
    assert done.returncode == 1, done.stdout
    assert done.stderr.startswith(f"error: run {run_id}: no model call recorded for step(s) 2")
    assert "Traceback" not in done.stderr, done.stderr


def test_a_missing_step_is_named(demo: Demo, tmp_path: Path) -> None:
    run_id = without_step(demo, tmp_path / "store.duckdb", "healthy", 2)
    with pytest.raises(RecordingError, match=r"no model call recorded for step\(s\) 2"):
        load_recording(Store(tmp_path / "store.duckdb"), run_id)


def test_a_missing_last_step_is_named(demo: Demo, tmp_path: Path) -> None:
    run_id = without_step(demo, tmp_path / "store.duckdb", "healthy", 3)
    with pytest.raises(RecordingError, match=r"no model call recorded for step\(s\) 3"):
        load_recording(Store(tmp_path / "store.duckdb"), run_id)
