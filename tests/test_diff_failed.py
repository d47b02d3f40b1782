"""A failed step beside its counterpart: the side-by-side view and ``looptrace diff`` (fixes).

The demo's context-overflow run as a user meets it (the real loop, the real ``anthropic`` SDK, the
scripted Messages API server, whose third answer is a 400), then a replay of it (the refusal comes
back from the recording) and a fork at step 2 whose live model reads a file that is not there and
answers. The side-by-side view showed the refused call as ``(answer)``, and a refused call and a
final answer compared as the same action, so the fork's step 3 was marked "=".
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from looptrace.loop.demo import run_scenarios
from looptrace.loop.model import AnthropicModel
from looptrace.loop.scenarios import SCENARIOS, make_sandbox
from looptrace.loop.scripted import SCRIPTED_MODEL, Script, act, say
from looptrace.loop.server import MessagesServer
from looptrace.loop.workspace import workspace_tools
from looptrace.replay.diff import CALL_FAILED, RunDiff, diff_runs, load_step_facts
from looptrace.replay.recording import load_recording
from looptrace.replay.replayer import replay
from looptrace.tracer import Tracing
from looptrace.tracer.cli.main import main as cli_main
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.screens import DiffScreen, StepScreen
from looptrace.viewer.widgets import DiffTable

TASK = "Find every warning in data/server.log."
ANSWER = "No warnings found: the log is not there."


@dataclass(frozen=True)
class Runs:
    db: Path
    original: str
    replay: str
    fork: str

    def diff(self, derived: str) -> RunDiff:
        with Store(self.db).reader() as conn:
            return diff_runs(load_step_facts(conn, self.original), load_step_facts(conn, derived))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    db = tmp_path_factory.mktemp("overflow") / "demo.duckdb"
    [(_, result)] = run_scenarios(db, [s for s in SCENARIOS if s.name == "context-overflow"])
    assert result.status == "context_overflow"
    recording = load_recording(Store(db), result.run_id)
    sandbox = make_sandbox(tmp_path_factory.mktemp("sandbox"))
    live = [act("read_file", {"path": "data/missing.log"}), say(ANSWER)]
    with Tracing(db) as tracing:
        replayed = replay(recording, tracing)
        with MessagesServer(Script({TASK: live})) as server:
            model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="offline")
            forked = replay(recording, tracing, fork_at_step=2, live_model=model, live_tools=workspace_tools(sandbox))
    assert replayed.result.status == "context_overflow" and forked.result.status == "ok"
    return Runs(db, result.run_id, replayed.result.run_id, forked.result.run_id)


def test_a_refused_call_is_not_an_answer_and_sits_beside_what_replaced_it(runs: Runs) -> None:
    d = runs.diff(runs.fork)
    steps = [(p.a.step if p.a else None, p.b.step if p.b else None, p.same) for p in d.pairs]
    # Step 2 read another file (and failed), step 3 answered where the original was refused.
    assert steps == [(1, 1, True), (2, 2, False), (3, 3, False)]
    refused, answer = d.pairs[2].a, d.pairs[2].b
    assert refused is not None and answer is not None
    assert refused.identity == CALL_FAILED and "prompt is too long" in (refused.call_error or "")
    assert answer.answered and not answer.failed
    failed_read = d.pairs[1].b
    assert failed_read is not None and failed_read.tool_errors and failed_read.call_error is None
    assert (d.first_divergence, d.common) == (1, 1)


def test_a_replay_refused_where_its_original_was_is_alike(runs: Runs) -> None:
    d = runs.diff(runs.replay)
    assert [(p.a.step if p.a else None, p.b.step if p.b else None) for p in d.pairs] == [(1, 1), (2, 2), (3, 3)]
    assert d.first_divergence is None
    last = d.pairs[2]
    assert last.a is not None and last.b is not None and last.a.call_error and last.b.call_error


def test_the_side_by_side_view_shows_the_failures(runs: Runs) -> None:
    async def scenario() -> None:
        app = ViewerApp(runs.db, refresh_seconds=None)
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            app.push_screen(DiffScreen(Store(runs.db), runs.fork))
            await settle(pilot)
            assert app.screen.query_one(DiffTable).row_count == 3
            lines = screen_text(app).splitlines()
            [step3] = [ln for ln in lines if re.search(r"^\s*[=≠]\s+3\s", ln)]
            # The refusal, with its error, on the line of the answer that replaced it.
            assert "≠" in step3 and "✗ call failed: BadRequestError 400" in step3 and "(answer)" in step3
            assert step3.index("✗ call failed") < step3.index("(answer)")
            [step2] = [ln for ln in lines if re.search(r"^\s*[=≠]\s+2\s", ln)]
            assert "≠" in step2 and re.search(r"✗ \w+ · read_file", step2), step2
            assert "data/missing.log" in step2 and "offset" in step2  # the fork's read beside the original's
            assert not any("(answer)" in ln and "=" in ln.split()[0] for ln in lines)
            # o opens the original's side of the line: the refused call, with its whole error.
            table = app.screen.query_one(DiffTable)
            assert table.move_to_key("2")
            await pilot.press("o")
            await settle(pilot)
            assert isinstance(app.screen, StepScreen)
            assert (app.screen.run_id, app.screen.step) == (runs.original, 3)
            assert "prompt is too long" in screen_text(app)

    asyncio.run(scenario())


def test_the_diff_command_says_the_call_failed(runs: Runs, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["diff", runs.original, runs.fork, "--db", str(runs.db)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    [k] = [k for k, ln in enumerate(lines) if re.match(r"^~\s+3\s", ln)]
    assert "✗ model call failed" in lines[k] and lines[k + 1].split() == ["→", "(answer)"]
    assert "first divergent decision at step 2 of A; 1 step in common" in out
