"""Every screen at 80x24 and 120x40 over the demo store: what matters is visible (Pilot, real app).

Issue 28 found, at ordinary sizes: the runs table cutting status to two letters with the diagnosis
off-screen, footers cut mid-key, the step-through screen's dividers wrapping, block glyphs mid-row
(scrollbar thumbs drawn with the sparkline's glyphs) and sparklines scaled from the lowest value.
These tests read the screen as text and compare it with the store.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from pathlib import Path

import pytest
from textual.pilot import Pilot

from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.screens import ReplayScreen, RunScreen, RunsScreen, SqlScreen, StepScreen
from looptrace.viewer.widgets import RunsTable
from looptrace.viewer.widgets.charts import spark

from .conftest import query
from .test_viewer import Scenario, run_id_of
from .test_viewer_small import _shows_every_key

SIZES = [(80, 24), (120, 40)]
GLYPHS = re.compile("[▁▂▃▄▅▆▇█▉▊▋▌▍▎▏]")


def run_at(db: Path, size: tuple[int, int], scenario: Scenario) -> None:
    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await scenario(app, pilot)

    asyncio.run(main())


def _glyphs_only_in_charts(text: str) -> None:
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if GLYPHS.search(line) and not line.lstrip().startswith(("▊", "▔", "▁▁")):  # the filter box's border
            caption = lines[i - 1].lstrip() if i else ""
            assert caption.startswith(("context tokens per step", "cost per step")), (i, line)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_runs_screen_shows_every_runs_status_and_diagnosis_in_full(demo: Path, size: tuple[int, int]) -> None:
    expected = Counter(query(demo, """
        SELECT r.status, d.label FROM runs r JOIN diagnoses d ON d.run_id = r.run_id AND d.is_primary
        WHERE r.parent_run_id IS NULL AND r.replay_of IS NULL AND r.forked_from IS NULL"""))
    assert sum(expected.values()) == 13

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        lines = screen_text(app).splitlines()
        assert all(len(line) <= size[0] for line in lines)
        rows = [re.split(r"\s{2,}", line.strip()) for line in lines if re.match(r"^ \d\d-\d\d \d\d:\d\d ", line)]
        shown: Counter[tuple[str, str]] = Counter()
        for fields in rows:
            # status then diagnosis, side by side, whole words (a second label adds " +1")
            pairs = [(a, b.split(" +")[0]) for a, b in zip(fields, fields[1:]) if (a, b.split(" +")[0]) in expected]
            assert len(pairs) >= 1, fields
            shown[pairs[0]] += 1
        assert shown == expected
        _shows_every_key(app)
        if size[0] >= 120:  # and the task before them, the steps after (the other numbers need ~160 columns)
            header = next(line for line in lines if line.lstrip().startswith("started"))
            assert re.search(r"agent\s+task\s+status\s+diagnosis\s+steps", header), header
            [budget] = [f for f in rows if any(x.startswith("demo-budget") for x in f)]
            assert budget[-1] == "3", budget

    run_at(demo, size, scenario)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_screen_keeps_its_keys_and_draws_no_stray_glyphs(demo: Path, size: tuple[int, int]) -> None:
    invalid = run_id_of(demo, "demo-invalid-args")

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        assert app.screen.query_one(RunsTable).move_to_key(invalid)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        text = screen_text(app)
        _shows_every_key(app)
        _glyphs_only_in_charts(text)
        assert "hallucinated_tool" in text and "path=README.md limit=0" in text  # the arguments, uncut
        await pilot.press("t")
        await settle(pilot)
        assert isinstance(app.screen, ReplayScreen)
        text = screen_text(app)
        _shows_every_key(app)
        _glyphs_only_in_charts(text)
        right = [line.split("│", 1)[1] for line in text.splitlines() if "│" in line]
        headings = [line for line in right if line.lstrip().startswith("── ")]
        assert {h.split()[1] for h in headings} >= {"thought", "call"}
        assert not [line for line in right if line.strip() and set(line.strip()) == {"─"}]  # no wrapped divider
        await pilot.press("escape", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        _shows_every_key(app)
        _glyphs_only_in_charts(screen_text(app))
        await pilot.press("escape", "escape", "colon")
        await settle(pilot)
        assert isinstance(app.screen, SqlScreen)
        _shows_every_key(app)
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen)

    run_at(demo, size, scenario)


def test_sparklines_scale_from_zero() -> None:
    assert spark([47, 94], 2) == "▅█"  # half the top is half a bar, not an empty one
    assert spark([47, 94], 10) == "▅▅▅███"  # a short run: three columns a step
    assert spark([94, 94], 2) == "██"
    assert spark([0, 5, 10], 3) == "▁▅█"
    assert spark([None, 3], 2) == " █"  # unknown is a gap, not a zero
    assert spark([0, 0], 2) == "▁▁"
    assert spark([1, 2, 3, 4, 5, 6, 7, 8], 4) == spark([2, 4, 6, 8], 4)  # past the width: each column's max
    assert spark([], 4) == "" and spark([1], 0) == ""
