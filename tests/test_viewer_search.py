"""Search across runs and the usage (roll-ups) screen: the data functions and the real app via Pilot."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from looptrace.tracer import Tracing
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import SIZE, settle
from looptrace.viewer.screens import SearchScreen, StepScreen, UsageScreen
from looptrace.viewer.screens.usage import usage_cell
from looptrace.viewer.search import required_literal, search
from looptrace.viewer.usage import load_usage
from looptrace.viewer.widgets import SyncedTable


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("search") / "search.duckdb"
    with Tracing(db) as tracing:
        for r in range(3):
            with tracing.run(f"agent-{r}", task="t", model="claude-sonnet-4-5") as run:
                for i in range(1, 5):
                    with run.step(f"run {r} thinks about needle-{i} at 100% of_it") as step:
                        with step.tool_call("grep", {"pattern": f"Haystack{i}"}) as call:
                            call.result(f"line {i}: the OBSERVED value\x1b[2J" + " pad" * 5000 + " tail-marker")
                run.finish("ok")
    return db, run.run_id


def test_substring_search_finds_thoughts_arguments_and_observations_case_insensitively(
        store: tuple[Path, str]) -> None:
    db, _ = store
    assert {h.field for h in search(Store(db), "needle-2").hits} == {"thought"}
    args = search(Store(db), "haystack3").hits
    assert [(h.field, h.step) for h in args] == [("arguments", 3)] * 3 and len({h.run_id for h in args}) == 3
    far = search(Store(db), "TAIL-MARKER").hits  # past 20 KB of text: the snippet is cut around the hit
    assert len(far) == 12 and all("tail-marker" in h.snippet and len(h.snippet) <= 160 for h in far)


def test_percent_and_underscore_are_literal_and_regex_is_opt_in(store: tuple[Path, str]) -> None:
    db, _ = store
    assert len(search(Store(db), "100% of_it").hits) == 12
    assert search(Store(db), "100%%of").hits == []
    assert len(search(Store(db), "of.it").hits) == 0
    assert len(search(Store(db), r"needle-[13]\b", regex=True).hits) == 6
    assert search(Store(db), "x'); DROP TABLE step_records; --").hits == []  # a parameter, not SQL
    assert len(search(Store(db), "needle").hits) == 12


@pytest.mark.parametrize(("pattern", "literal"), [
    (r"src/f7\.py", "src/f7.py"), ("nowhere-[0-9]+-in", "nowhere-"), ("(foo)Bar+baz", "baz"),
    ("abc|abd", None), ("x?yz", None), ("[", None), ("(?x)abc def", None), ("HeLLo world", "hello world"),
])
def test_required_literal_only_names_text_every_match_contains(pattern: str, literal: str | None) -> None:
    assert required_literal(pattern) == literal


def test_regex_shortcut_never_loses_a_match_that_case_folding_finds(tmp_path: Path) -> None:
    db = tmp_path / "fold.duckdb"
    with Tracing(db) as tracing:
        with tracing.run("a", task="t", model="m") as run:
            for thought in ("plain src/f7.py", "\u017frc/f7.py with a long s", "SRC/F7.PY shouting", "other"):
                with run.step(thought):
                    pass
            run.finish("ok")
    hits = search(Store(db), r"src/f7\.py", regex=True).hits  # RE2 folds U+017F to s; lower() does not
    assert sorted(h.snippet[:5] for h in hits) == ["SRC/F", "plain", "\u017frc/f"]


def test_results_are_bounded_and_say_more_exist(store: tuple[Path, str]) -> None:
    db, _ = store
    page = search(Store(db), "pad", limit=5)
    assert len(page.hits) == 5 and page.more
    assert [(h.run_id, h.step) for h in page.hits] == sorted((h.run_id, h.step) for h in page.hits)
    assert not search(Store(db), "needle-4", limit=5).more


def test_usage_cells_tell_unknown_from_zero() -> None:
    assert usage_cell("cost_usd", None).plain == "unknown"
    assert usage_cell("cost_usd", 0.0).plain == "$0.0000"
    assert usage_cell("tokens", 12345).plain == "12,345"


def _run(db: Path, scenario) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await scenario(app, pilot)

    asyncio.run(main())


def test_search_box_finds_a_string_and_enter_opens_its_step(store: tuple[Path, str]) -> None:
    db, _ = store

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        await pilot.press("s")
        await settle(pilot)
        assert isinstance(app.screen, SearchScreen)
        app.screen.query_one(Input).value = "haystack2"
        await pilot.press("enter")
        await settle(pilot)
        table = app.screen.query_one(SyncedTable)
        assert table.row_count == 3
        assert [c.plain for c in table.get_row_at(0)][2:4] == ["2", "arguments"]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.step == 2
        assert app.screen.run_id == min(h.run_id for h in search(Store(db), "haystack2").hits)

    _run(db, scenario)


def test_usage_screen_shows_the_roll_ups(demo: Path) -> None:
    expected = {by: len(r.rows) for by, r in load_usage(Store(demo))}

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, UsageScreen)
        for by, n in expected.items():
            table = app.screen.query_one(f"#usage-{by}", SyncedTable)
            assert table.row_count == n and n > 0
        first = [c.plain for c in app.screen.query_one("#usage-agent", SyncedTable).get_row_at(0)]
        assert first[0] == "demo-budget" and first[-1].startswith("$")  # the most expensive agent first

    _run(demo, scenario)
