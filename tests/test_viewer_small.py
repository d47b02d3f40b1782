"""The viewer at 80x24, its sort indicator, and diagnoses for runs shown without one (Pilot)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from textual.pilot import Pilot

from looptrace.loop.demo import run_scenarios
from looptrace.loop.scenarios import SCENARIOS
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.data import SORTS
from looptrace.viewer.screens import HelpScreen, RunScreen, StepScreen
from looptrace.viewer.screens.help import key_rows, reflow
from looptrace.viewer.widgets import RunsTable
from looptrace.viewer.widgets.runs_table import RUN_COLUMNS

from .conftest import query
from .test_viewer import Scenario, run_id_of

SMALL = (80, 24)


def run_small(db: Path, scenario: Scenario) -> None:
    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            await scenario(app, pilot)

    asyncio.run(main())


def _shows_every_key(app: ViewerApp) -> None:
    footer = screen_text(app).splitlines()[-1]
    for key, description in key_rows(app.screen):
        assert f"{key} {description}" in footer, (description, footer)


def test_at_80x24_every_screen_shows_its_status_and_key_hints(demo: Path) -> None:
    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        lines = screen_text(app).splitlines()
        assert len(lines) == 24 and lines[-2].lstrip().startswith("15 runs, 13 shown  · sort: started ▼")
        _shows_every_key(app)
        assert app.screen.query_one(RunsTable).move_to_key(run_id_of(demo, "demo-stagnation"))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        _shows_every_key(app)
        assert "stagnation" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen)
        _shows_every_key(app)

    run_small(demo, scenario)


def test_help_taller_than_the_terminal_scrolls(demo: Path) -> None:
    # At 80x24 every help fits whole (test_viewer_widths); in a shorter terminal it scrolls.
    async def main() -> None:
        app = ViewerApp(demo, refresh_seconds=None)
        async with app.run_test(size=(80, 14)) as pilot:
            await settle(pilot)
            await pilot.press("question_mark")
            await settle(pilot)
            assert isinstance(app.screen, HelpScreen)
            text = screen_text(app)
            assert all(len(line) <= 80 for line in text.splitlines())
            assert "╮" in text.splitlines()[0]  # the box's right edge is on screen
            assert "marked ↳." not in text  # taller than the screen ...
            await pilot.press("end")
            await settle(pilot)
            assert "marked ↳." in screen_text(app)  # ... and scrolls to its end

    asyncio.run(main())


def test_reflow_joins_hard_wrapped_lines_but_keeps_examples() -> None:
    assert reflow("one\ntwo, e.g.\n    example\nthree\n\nfour") == "one two, e.g.\n    example\nthree\n\nfour"


def test_the_sort_indicator_follows_the_sort(demo: Path) -> None:
    headings = {c.key: c.heading for c in RUN_COLUMNS}

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        table = app.screen.query_one(RunsTable)
        for key in ("o", "o", "O", "o", "O"):
            await pilot.press(key)
            await settle(pilot)
            sort, arrow = app.screen.sort, "▼" if app.screen.descending else "▲"  # type: ignore[attr-defined]
            assert sort in SORTS
            marked = [str(c.label) for c in table.columns.values() if str(c.label).endswith(("▼", "▲"))]
            assert marked == [f"{headings[sort]} {arrow}"]
            assert f"sort: {sort} {arrow}" in screen_text(app)
            if sort == "agent":  # the rows follow too
                agents = [table.get_row_at(i)[1].plain for i in range(table.row_count)]
                assert agents == sorted(agents, reverse=arrow == "▼")

    run_small(demo, scenario)


def test_runs_shown_without_a_diagnosis_are_analysed_in_a_worker(tmp_path: Path) -> None:
    db = tmp_path / "fresh.duckdb"
    run_scenarios(db, [s for s in SCENARIOS if s.name in ("healthy", "stagnation", "hallucinated-tools")])
    assert query(db, "SELECT count(*) FROM diagnoses") == [(0,)]  # written by a traced agent: none yet

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        table = app.screen.query_one(RunsTable)
        # By run id, the diagnosis column wherever the width puts it.
        column = table.get_column_index("diagnosis")
        labels = {key: table.get_row_at(i)[column].plain for i, key in enumerate(table.keys())}
        assert labels[run_id_of(db, "demo-stagnation")].startswith("stagnation")
        assert labels[run_id_of(db, "demo-healthy")].startswith("ok")
        assert "No diagnosis" not in screen_text(app)
        assert table.move_to_key(run_id_of(db, "demo-stagnation"))
        await pilot.press("enter")
        await settle(pilot)
        assert "times in a row" in screen_text(app)  # the stagnation explanation

    run_small(db, scenario)
    assert query(db, "SELECT count(DISTINCT run_id) FROM diagnoses") == [(3,)]


def test_a_run_opened_without_a_diagnosis_is_analysed_on_its_screen(tmp_path: Path, demo: Path) -> None:
    db = tmp_path / "demo.duckdb"
    shutil.copy(demo, db)
    # A sub-agent's run: not in the top-level list, so only its own screen can find it undiagnosed.
    [(child,)] = query(db, "SELECT run_id FROM runs WHERE parent_run_id IS NOT NULL ORDER BY run_id LIMIT 1")

    async def main() -> None:
        from looptrace.tracer.store import Store

        with Store(db).writer() as conn:  # as if it had never been analysed
            conn.execute("DELETE FROM diagnoses WHERE run_id = ?", [child])
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=SMALL) as pilot:
            await settle(pilot)
            app.push_screen(RunScreen(app.store, child, refresh_seconds=None))
            await settle(pilot)
            assert "The run ended normally" in screen_text(app)

    asyncio.run(main())
    assert query(db, "SELECT label FROM diagnoses WHERE run_id = ? AND is_primary", [child]) == [("ok",)]
