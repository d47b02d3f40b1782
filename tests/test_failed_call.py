"""A failed model call reads as a failed call, and a number nobody knows is shown as unknown (issue 40).

The demo's context-overflow run, as a user meets it: the real loop, the real ``anthropic`` SDK and the
scripted Messages API server, whose third answer is a 400 ("prompt is too long"). That step has no tool
call, yet it is no final answer, and its usage is unknown: the store holds NULL for it (it held 0, from
the step's counters), and the viewer, the HTML report and the run's totals say so (they drew
``(answer)``, ``no tool call (final answer)`` and ``tokens 0 in / 0 out · $0.0000``). A model with no
price has an unknown cost too, never $0.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from looptrace.loop.demo import run_scenarios
from looptrace.loop.scenarios import SCENARIOS
from looptrace.loop.scripted import say
from looptrace.loop.server import MessagesServer
from looptrace.replay.analyzer import analyze_store
from looptrace.tracer import Tracing
from looptrace.tracer.cli.main import main
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.data import load_step
from looptrace.viewer.screens import RunScreen, StepScreen
from looptrace.viewer.widgets import RunsTable, Timeline
from looptrace.viewer.widgets.step_view import step_text

from .conftest import query


@pytest.fixture(scope="module")
def overflow(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo's context-overflow scenario alone, analysed: (store, run id)."""
    db = tmp_path_factory.mktemp("overflow") / "demo.duckdb"
    [(_, result)] = run_scenarios(db, [s for s in SCENARIOS if s.name == "context-overflow"])
    assert result.status == "context_overflow"
    analyze_store(Store(db))
    return db, result.run_id


def test_the_store_holds_the_refused_calls_usage_as_unknown(overflow: tuple[Path, str]) -> None:
    db, run_id = overflow
    steps = query(db, "SELECT step, tool, input_tokens, output_tokens, cost_usd FROM steps WHERE run_id = ? "
                      "ORDER BY step", [run_id])
    assert [s[0] for s in steps] == [1, 2, 3]
    assert all(s[2] and s[3] and s[4] for s in steps[:2])  # the two answered calls: known usage
    assert steps[2] == (3, None, None, None, None)  # the refused call: unknown, not 0
    [(error, tokens)] = query(db, "SELECT error, input_tokens FROM llm_calls WHERE run_id = ? AND step = 3", [run_id])
    assert "prompt is too long" in error and tokens is None
    # The run's totals are what is known: the two answered calls.
    assert query(db, "SELECT r.input_tokens = (SELECT sum(input_tokens) FROM llm_calls l WHERE l.run_id = r.run_id) "
                     "AND r.cost_usd > 0 FROM runs r WHERE run_id = ?", [run_id]) == [(True,)]


def test_the_viewer_shows_the_refused_call_as_a_failed_call(overflow: tuple[Path, str]) -> None:
    db, run_id = overflow

    async def scenario() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot)
            assert app.screen.query_one(RunsTable).move_to_key(run_id)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen)
            text = screen_text(app)
            [line] = [ln for ln in text.splitlines() if re.match(r"\s+3\s.*\(", ln)]
            assert "(call failed)" in line and "✗" in line and "model call: BadRequest" in line
            assert "(answer)" not in line and not re.search(r"\b0\s", line.split("(call failed)")[1])
            assert "last unknown (step 3)" in text  # the context chart's caption (it said "last 0")
            timeline = app.screen.query_one(Timeline)
            assert timeline.move_to_step(3)
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, StepScreen) and app.screen.step == 3
            text = screen_text(app)
            assert "tokens unknown · context unknown · cost unknown" in text  # it read "tokens 0 in / 0 out · context - · $0.0000"
            assert "no tool call: the model call failed" in text and " failed " in text
            assert "prompt is too long" in text
            for misleading in ("final answer", "0 in / 0 out", "$0.0000", "stop ?"):
                assert misleading not in text, misleading

    asyncio.run(scenario())


def test_the_report_shows_the_refused_call_as_a_failed_call(overflow: tuple[Path, str], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    db, run_id = overflow
    out = tmp_path / "run.html"
    assert main(["report", run_id[:12], "--db", str(db), "-o", str(out)]) == 0
    page = out.read_text()
    step3 = page[page.index('id="step-3"'):]
    step3 = re.sub(r"<[^>]+>", " ", step3[:step3.index("</section>")])
    assert "tokens unknown" in step3 and "cost unknown" in step3
    assert "model call failed" in step3 and "prompt is too long" in step3
    assert "final answer" not in step3 and "$0.0000" not in step3 and "0 in / 0 out" not in step3
    assert 'class="step err' in page[page.index('id="step-3"') - 40:page.index('id="step-3"')]


def test_a_model_with_no_price_has_an_unknown_cost_not_zero(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    server = MessagesServer([say("done")]).start()
    try:
        import anthropic

        client = anthropic.Anthropic(base_url=server.base_url, api_key="offline")
        request = {"model": "house-model-7", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        with Tracing(db) as tracing, tracing.run("a", task="hi", model="house-model-7") as run:
            with run.step() as step, step.llm_call(request) as call:
                call.response(client.messages.create(**request).model_dump())
            run.finish("ok", answer="done")
    finally:
        server.stop()
    [(tokens, llm_cost)] = query(db, "SELECT input_tokens, cost_usd FROM llm_calls")
    assert tokens and llm_cost is None  # tokens known, the price not: the cost is unknown
    [(step_tokens, step_cost, run_cost)] = query(db, "SELECT s.input_tokens, s.cost_usd, r.cost_usd FROM steps s "
                                                     "JOIN runs r USING (run_id)")
    assert step_tokens == tokens and step_cost is None and run_cost is None
    [(unpriced,)] = query(db, "SELECT unpriced_runs FROM usage_by_agent")
    assert unpriced == 1
    [(run_id,)] = query(db, "SELECT run_id FROM runs")
    detail = load_step(Store(db), run_id, 1)
    assert detail is not None
    text = step_text(detail).plain
    assert "cost unknown" in text and "$0.0000" not in text


def test_a_run_with_one_unpriced_call_has_an_unknown_cost_not_the_priced_part(tmp_path: Path) -> None:
    """Two calls of a priced model and one of a model with no price: the run's cost is unknown, not the
    two priced calls' sum (which would read as the whole run's). A call that failed before using any
    tokens adds nothing: a run of priced calls plus a refused one keeps its sum."""
    db = tmp_path / "t.duckdb"
    server = MessagesServer([say("one"), say("two"), say("three"), say("four"), say("five")]).start()
    try:
        import anthropic

        client = anthropic.Anthropic(base_url=server.base_url, api_key="offline")
        with Tracing(db) as tracing:
            for run_name, models in (("mixed", ["claude-sonnet-4-5", "house-model-7", "claude-sonnet-4-5"]),
                                     ("priced", ["claude-sonnet-4-5", "claude-sonnet-4-5"])):
                with tracing.run(run_name, task="hi", model="claude-sonnet-4-5") as run:
                    for model in models:
                        request = {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
                        with run.step() as step, step.llm_call(request) as call:
                            call.response(client.messages.create(**request).model_dump())
                    if run_name == "priced":  # a call refused before any tokens: no usage, no cost
                        with run.step() as step, step.llm_call({"model": "claude-sonnet-4-5"}) as call:
                            call.fail(RuntimeError("refused"))
                    run.finish("ok", answer="done")
    finally:
        server.stop()
    costs = dict(query(db, "SELECT agent, cost_usd FROM runs"))
    priced_calls = query(db, "SELECT r.agent, l.cost_usd FROM llm_calls l JOIN runs r USING (run_id) "
                             "WHERE l.model = 'claude-sonnet-4-5' AND l.input_tokens IS NOT NULL")
    assert len(priced_calls) == 4 and all(c for _, c in priced_calls)
    assert costs["mixed"] is None
    assert costs["priced"] == pytest.approx(sum(c for agent, c in priced_calls if agent == "priced"))
    assert dict(query(db, "SELECT agent, cost_usd FROM run_usage"))["mixed"] is None
    assert query(db, "SELECT sum(unpriced_runs) FROM usage_by_agent") == [(1,)]
