"""Nothing raw from a hostile run reaches what the viewer writes to the terminal (issue 18, case 3).

Pilot runs headless, where the driver writes nothing; so on every screen, and on every step of the
step and step-through screens, this test renders the frame's lines with the app's console, as
Textual does before handing them to the terminal driver, and searches that text. Before, the tool
name went into the step heading unescaped: its OSC title sequence reached the terminal.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot

from looptrace.tracer import Tracing
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import SIZE, screen_text, settle
from looptrace.viewer.screens import DiffScreen, HelpScreen, ReplayScreen, RunScreen, SqlScreen, StepScreen

from .test_viewer_hostile import CONTROLS, MARKUP, hostile_store

# Textual's own output is SGR and cursor movement (ESC [ ... letter) and nothing else: an OSC, BEL,
# C1 control or bidi override in a frame can only have come from the data.
_FOREIGN = ["\x1b]", "\x07", "\x1bP", "\x9b", "\x9d", "\x90", "\u202e", "\u2066", "\x1b[2J", "pwned\x07"]


ESCAPED = "pwned"  # in every hostile step, escaped: proves the text was on screen


def frame(app: ViewerApp) -> str:
    """The current screen, as the text the driver would write for a full repaint: each line's
    segments rendered by the app's console (styles become SGR sequences, text goes out as is)."""
    return "\n".join(strip.render(app.console) for strip in app.screen._compositor.render_strips())


def check_frame(app: ViewerApp, where: str, seen: list[str], *, shows: str = "") -> None:
    out = frame(app)
    found = [s for s in _FOREIGN if s in out]
    assert not found, f"{where}: raw {found!r} in the driver output"
    assert shows in out, f"{where}: the hostile text was not on screen: {screen_text(app)[:1500]}"
    seen.append(where)


async def settled(pilot: Pilot[None]) -> None:
    # Short: a frame is checked whatever is still loading, and ``shows`` proves the text was there.
    await settle(pilot, timeout=10.0)


@pytest.fixture(scope="module")
def hostile_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, int]:
    """The hostile run of test_viewer_hostile, plus a replay of it with hostile tool names."""
    db = tmp_path_factory.mktemp("driver") / "hostile.duckdb"
    run_id = hostile_store(db)
    with Tracing(db) as tracing, tracing.run(
            "\x1b]0;agent\x07", task=CONTROLS[0], links={"replay_of": run_id}) as replay:
        for tool in (CONTROLS[0], MARKUP[1], CONTROLS[3]):
            with replay.step(CONTROLS[2]) as step, step.tool_call(tool, {"e": CONTROLS[0]}) as call:
                call.result(CONTROLS[1])
    return db, run_id, replay.run_id, 3


def test_every_screen_and_step_writes_no_raw_control_to_the_driver(hostile_pair: tuple[Path, str, str, int]) -> None:
    db, run_id, replay_id, n_steps = hostile_pair
    seen: list[str] = []

    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=SIZE) as pilot:
            await settled(pilot)
            check_frame(app, "runs", seen)
            for rid in (run_id, replay_id):
                app.push_screen(RunScreen(app.store, rid, refresh_seconds=None))
                await settled(pilot)
                check_frame(app, f"run {rid[:8]}", seen)
                await pilot.press("enter")  # the step under the timeline's cursor: step 1
                await settled(pilot)
                for step in range(1, n_steps + 1):
                    assert isinstance(app.screen, StepScreen)
                    check_frame(app, f"step {step} of {rid[:8]}", seen, shows=ESCAPED)
                    await pilot.press("n")
                    await settled(pilot)
                await pilot.press("escape", "t")
                await settled(pilot)
                for step in range(1, n_steps + 1):
                    assert isinstance(app.screen, ReplayScreen)
                    check_frame(app, f"step-through {step} of {rid[:8]}", seen, shows=ESCAPED)
                    await pilot.press("n")
                    await settled(pilot)
                await pilot.press("escape", "escape")
                await settled(pilot)
            app.push_screen(DiffScreen(app.store, replay_id))
            await settled(pilot)
            check_frame(app, "side by side", seen)
            await pilot.press("escape")
            await settled(pilot)
            app.push_screen(SqlScreen(app.store))
            await settled(pilot)
            from textual.widgets import TextArea

            app.screen.query_one(TextArea).text = "SELECT tool, thought, observation, args FROM steps"
            await pilot.press("ctrl+r")
            await settle(pilot, timeout=60)
            check_frame(app, "sql", seen, shows=ESCAPED)
            await pilot.press("f1")
            await settled(pilot)
            assert isinstance(app.screen, HelpScreen)
            check_frame(app, "help", seen)
            assert app.is_running

    asyncio.run(main())
    assert len(seen) == 1 + 2 * (1 + 2 * n_steps) + 3
