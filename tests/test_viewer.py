"""The viewer: pure parts as plain functions, the real app driven by Pilot on a real demo store.

Pilot tests are plain functions running ``asyncio.run`` (no pytest-asyncio). The demo store is
built once per module; the app runs with live refresh off except in the live test, so what a test
sees depends only on its keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from looptrace.tracer import Tracing
from looptrace.tracer.store import SegmentWriter, Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import SIZE, capture, mask, screen_text, settle
from looptrace.viewer.data import TEXT_CAP, TimelineStep, list_runs, load_actions, load_diff, load_run, load_step
from looptrace.viewer.filters import RunFilter, parse_filter
from looptrace.viewer.format import evidence_lines, fmt_compact, short_args
from looptrace.viewer.messages import StepHighlighted, StepSelected
from looptrace.viewer.pager import pager_command, write_pager_file
from looptrace.viewer.safe import safe
from looptrace.viewer.screens import DiffScreen, HelpScreen, ReplayScreen, RunScreen, RunsScreen, SqlScreen, StepScreen
from looptrace.viewer.stepping import first_divergence, first_error, first_repeat, step_after
from looptrace.viewer.widgets import DiffTable, RunsTable, Timeline
from looptrace.viewer.widgets import timeline as timeline_module

from .conftest import PYTHON, ROOT, python_env

SNAPSHOTS = Path(__file__).parent / "snapshots"

Scenario = Callable[[ViewerApp, Pilot[None]], Awaitable[None]]


def run_app(db: Path, scenario: Scenario, *, refresh: float | None = None) -> None:
    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=refresh)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await scenario(app, pilot)

    asyncio.run(main())


def run_id_of(db: Path, agent: str) -> str:
    [row] = [r for r in list_runs(Store(db), parse_filter(f"agent:{agent}")).rows if r.agent == agent]
    return row.run_id


async def open_run(app: ViewerApp, pilot: Pilot[None], run_id: str) -> RunScreen:
    assert app.screen.query_one(RunsTable).move_to_key(run_id)
    await pilot.press("enter")
    await settle(pilot)
    assert isinstance(app.screen, RunScreen) and app.screen.run_id == run_id
    return app.screen


# -- pure parts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", RunFilter()),
        ("status:stagnated", RunFilter(statuses=("stagnated",))),
        ("status:ok status:Error label:cap_hit", RunFilter(statuses=("ok", "error"), labels=("cap_hit",))),
        ("agent:demo model:scripted deploy date", RunFilter(agents=("demo",), models=("scripted",),
                                                            words=("deploy", "date"))),
        ('"deploy date" agent:x', RunFilter(agents=("x",), words=("deploy date",))),
        ('status:"ok', RunFilter(statuses=("ok",))),  # an unclosed quote while typing
        ("colour:red", RunFilter(errors=("unknown filter colour: (use status:, label:, agent:, model:)",))),
        ("status:", RunFilter(errors=("status: needs a value",))),
        ("at 12:30", RunFilter(words=("at", "12:30"))),  # not a key: a word
    ],
)
def test_parse_filter(text: str, expected: RunFilter) -> None:
    assert parse_filter(text) == expected


def _steps(*actions: str | None, errors: tuple[int, ...] = ()) -> list[TimelineStep]:
    return [TimelineStep(i, ("t",), ("{}",), 0, 0, 0, None, 0.0, i in errors, (), a)
            for i, a in enumerate(actions, 1)]


def test_stepping_targets() -> None:
    steps = _steps("a", "b", None, None, "b", "c", errors=(4, 6))
    assert first_error(steps) == 4
    assert first_repeat(steps) == 5  # two final answers (None) are not repeated actions
    assert first_repeat(_steps("a", "b")) is None and first_error(_steps("a")) is None
    assert step_after(steps, 1, -1) == 1 and step_after(steps, 1, 2) == 3 and step_after(steps, 6, 1) == 6
    original = [(1, "a"), (2, "b"), (3, "c")]
    assert first_divergence(original, [(1, "a"), (2, "b"), (3, "c")]) is None
    assert first_divergence(original, [(1, "a"), (2, "x"), (3, "c")]) == 2
    assert first_divergence(original, [(1, "a"), (2, "b")]) == 3  # the replay stopped early
    assert first_divergence(original, [(1, "a"), (2, "b"), (3, "c"), (4, "d")]) == 4
    assert first_divergence(original, [(3, "x")]) == 3  # a fork recorded from its fork step
    assert first_divergence(original, [(2, "b"), (3, "c")]) is None


def test_formatting_and_safe_text() -> None:
    assert short_args('{"path": "a.txt", "n": 2}') == "path=a.txt n=2"
    assert short_args("not json\n  at all") == "not json at all"
    assert short_args('{"x": "' + "y" * 100 + '"}', 10) == "x=yyyyyyy…"
    assert [fmt_compact(n) for n in (5, 9_999, 186_000, 2_500_000)] == ["5", "9,999", "186k", "2.5M"]
    assert evidence_lines('{"count": 2, "tools": ["a"]}') == 'count  2\ntools  ["a"]'
    hostile = "[bold]x[/] [@click=app.quit]q[/] \x1b]0;t\x07 \x1b[2J \x9b \u202e"
    text = safe(hostile)
    assert text.plain == "[bold]x[/] [@click=app.quit]q[/] \\x1b]0;t\\x07 \\x1b[2J \\x9b \\u202e"
    assert not text.spans and str(text.style) == ""
    assert safe(None).plain == "" and safe("a\nb", newlines=False).plain == "a\\nb"
    assert safe("abcdef", width=4).plain == "abc…"


def test_pager_command_and_file(tmp_path: Path) -> None:
    assert pager_command("/t/x.txt", {}) == ["less", "/t/x.txt"]
    assert pager_command("/t/x.txt", {"PAGER": "less -R -S"}) == ["less", "-R", "-S", "/t/x.txt"]
    assert pager_command("/t/x.txt", {"PAGER": "  "}) == ["less", "/t/x.txt"]
    assert pager_command("/t/x.txt", {"PAGER": "'my pager"}) == ["'my pager", "/t/x.txt"]
    path = write_pager_file("a\x1b[2Jb\n")
    try:
        assert path.read_text(encoding="utf-8") == "a\\x1b[2Jb\n"
    finally:
        path.unlink()


def test_core_never_imports_textual() -> None:
    code = ("import argparse, sys, looptrace.viewer, looptrace.viewer.data, looptrace.viewer.queries, "
            "looptrace.viewer.filters, looptrace.viewer.stepping, looptrace.viewer.format, looptrace.viewer.pager, "
            "looptrace.viewer.commands; "
            "looptrace.viewer.commands.register(argparse.ArgumentParser().add_subparsers()); "
            "print('textual' in sys.modules)")
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=python_env(), cwd=ROOT)
    assert result.stdout.split() == ["False"], result.stderr


# -- data ---------------------------------------------------------------------------------------


def test_data_functions_are_bounded(demo: Path) -> None:
    store = Store(demo)
    page = list_runs(store, limit=5)
    assert len(page.rows) == 5 and page.more and page.total_runs == 15
    assert not list_runs(store).more
    orchestrator = run_id_of(demo, "demo-orchestrator")
    children = list_runs(store, parent=orchestrator).rows
    assert [r.agent for r in children] == ["demo-orchestrator-worker"] * 2
    assert all(r.is_child for r in children)
    detail = load_run(store, run_id_of(demo, "demo-cycle"), limit=4)
    assert detail is not None and [s.step for s in detail.steps] == [1, 2, 3, 4] and detail.more_steps
    assert load_run(store, "no-such-run") is None


def test_step_text_is_capped_with_its_size(tmp_path: Path) -> None:
    db = tmp_path / "big.duckdb"
    big = "0123456789" * 20_000  # 200 KB
    with Tracing(db) as tracing, tracing.run("big", task="t") as run:
        with run.step("thinking") as step, step.tool_call("read", {"path": "big"}) as call:
            call.result(big)
    [row] = list_runs(Store(db)).rows
    detail = load_step(Store(db), row.run_id, 1)
    assert detail is not None
    assert detail.calls[0].observation == big[:TEXT_CAP] and detail.calls[0].observation_bytes == len(big)
    assert detail.hidden_bytes == len(big) - TEXT_CAP
    [timeline_step] = load_run(Store(db), row.run_id).steps  # type: ignore[union-attr]
    assert timeline_step.observation_bytes == len(big)


# -- the timeline widget -------------------------------------------------------------------------


class _TimelineApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, int]] = []

    def compose(self) -> ComposeResult:
        yield Timeline()

    def on_step_highlighted(self, message: StepHighlighted) -> None:
        self.events.append(("highlighted", message.step))

    def on_step_selected(self, message: StepSelected) -> None:
        self.events.append(("selected", message.step))


def test_timeline_draws_only_the_rows_on_screen_and_keeps_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    step_cells = timeline_module.step_cells

    def counted(s: TimelineStep, diagnosed: tuple[int, int] | None) -> list[Text]:
        made.append(s.step)
        return step_cells(s, diagnosed)

    monkeypatch.setattr(timeline_module, "step_cells", counted)
    steps = _steps(*["a"] * 1_000)

    async def main() -> None:
        app = _TimelineApp()
        async with app.run_test(size=(80, 12)) as pilot:  # a header and 11 rows
            timeline = app.query_one(Timeline)
            timeline.focus()
            timeline.show(steps[:990], (3, 4))
            await pilot.pause()
            assert timeline.row_count == 990 and timeline.current_step == 1
            made.clear()
            await pilot.press("down")
            assert timeline.current_step == 2 and app.events == [("highlighted", 2)]
            assert 0 < len(made) <= 11  # a cursor move draws a screenful at most, not 990 rows
            await pilot.press("pagedown")
            assert timeline.current_step == 13 and timeline.scroll_y == 11  # a page is the 11 rows
            await pilot.press("end")
            assert timeline.current_step == 990 and timeline.scroll_y == 979
            assert screen_text(app).splitlines()[-1].split()[0] == "990"
            await pilot.press("home", "down", "enter")
            assert timeline.current_step == 2 and app.events[-1] == ("selected", 2)

            # Live refresh: the run grew while the user looked elsewhere; nothing they see moves.
            timeline.scroll_to(y=500, animate=False)
            await pilot.pause()
            timeline.show(steps, (3, 4))
            await pilot.pause()
            assert timeline.row_count == 1_000 and timeline.current_step == 2 and timeline.scroll_y == 500
            assert timeline.move_to_step(1_000) and not timeline.move_to_step(1_001)
            await pilot.pause()
            assert timeline.current_step == 1_000 and timeline.scroll_y == 989

    asyncio.run(main())


# -- the app ------------------------------------------------------------------------------------


def test_runs_screen_counts_sort_filter_children_and_help(demo: Path) -> None:
    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        assert isinstance(app.screen, RunsScreen)
        table = app.screen.query_one(RunsTable)
        assert table.row_count == 13  # roots; the two sub-agents are reached from their parent
        text = screen_text(app)
        assert "15 runs, 13 shown" in text and "demo-stagnation" in text and "stagnation" in text

        await pilot.press("o", "O")  # sort by agent, ascending
        await settle(pilot)
        agents = [table.get_row_at(i)[1].plain for i in range(table.row_count)]
        assert agents == sorted(agents) and "sort: agent ▲" in screen_text(app)

        await pilot.press("slash")
        app.screen.query_one(Input).value = "status:stagnated"
        await pilot.press("enter")
        await settle(pilot)
        assert [table.get_row_at(i)[4].plain for i in range(table.row_count)] == ["stagnated", "stagnated"]
        assert "15 runs, 2 shown" in screen_text(app)
        await pilot.press("slash")
        app.screen.query_one(Input).value = "status:stagnated agent:cycle"
        await pilot.press("enter")
        await settle(pilot)
        assert [table.get_row_at(i)[1].plain for i in range(table.row_count)] == ["demo-cycle"]
        await pilot.press("slash")
        app.screen.query_one(Input).value = ""
        await pilot.press("enter")
        await settle(pilot)

        table.move_to_key(run_id_of(demo, "demo-orchestrator"))
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen) and app.screen.parent_run
        assert app.screen.query_one(RunsTable).row_count == 2
        assert screen_text(app).count("↳sub demo-orchestrator-wor") == 2
        await pilot.press("escape")

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "Keys: runs" in text and "Filter" in text and "Children" in text and "status:stagnated" in text
        await pilot.press("escape")
        assert isinstance(app.screen, RunsScreen) and app.screen.parent_run is None

    run_app(demo, scenario)


def test_run_evidence_step_and_step_through(demo: Path) -> None:
    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        # demo-context-overflow: diagnosed context_bomb at steps 2-3, a 213 KB observation at step 2.
        screen = await open_run(app, pilot, run_id_of(demo, "demo-context-overflow"))
        timeline = screen.query_one(Timeline)
        assert timeline.current_step == 1 and timeline.row_count == 3
        text = screen_text(app)
        assert "context_bomb" in text and "steps 2–3" in text and "context tokens per step: peak" in text
        await pilot.press("e")
        assert timeline.current_step == 2

        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.step == 2
        text = screen_text(app)
        assert "── call 0: read_file" in text and "observation (213.5 KB)" in text
        assert "INFO request 3000 handled" in text
        assert "153,138 bytes not shown: press o" in text  # capped at 64 KB: the view stays quick
        await pilot.press("end")
        await pilot.pause()
        assert "stop tool_use" in screen_text(app)  # the model call, at the bottom of the scroll
        await pilot.press("n")
        await settle(pilot)
        assert app.screen.step == 3 and "step 3" in screen_text(app)
        await pilot.press("escape")
        assert app.screen is screen

        await pilot.press("escape")

        # demo-cycle: list_dir, read_file, list_dir, ... so step 3 repeats step 1.
        await open_run(app, pilot, run_id_of(demo, "demo-cycle"))
        await pilot.press("t")
        await settle(pilot)
        assert isinstance(app.screen, ReplayScreen)
        timeline = app.screen.query_one(Timeline)
        await pilot.press("n")
        assert timeline.current_step == 2
        await pilot.press("p")
        assert timeline.current_step == 1
        await pilot.press("r")
        await settle(pilot)
        text = screen_text(app)
        assert timeline.current_step == 3 and "step 3 of 12" in text and "── call 0: list_dir" in text
        await pilot.press("f")
        assert "no error in this run" in screen_text(app)
        await pilot.press("d")
        assert "no divergence: this run is not a replay or a fork" in screen_text(app)
        await pilot.press("x")
        assert "nothing to put side by side: this run is not a replay or a fork" in screen_text(app)

    run_app(demo, scenario)


def _replay_store(db: Path) -> tuple[str, str, str]:
    """An original run, a replay that diverges at step 3, and a fork at step 2 that does not."""
    with Tracing(db) as tracing:
        with tracing.run("orig", task="original") as original:
            for i, tool in enumerate(["ls", "read", "grep"]):
                with original.step(f"step {i}") as step, step.tool_call(tool, {"i": i}) as call:
                    call.result("ok")
        with tracing.run("orig", task="replay", links={"replay_of": original.run_id}) as replay:
            for i, tool in enumerate(["ls", "read", "cat"]):
                with replay.step(f"step {i}") as step, step.tool_call(tool, {"i": i}) as call:
                    call.result("ok")
        with tracing.run("orig", task="fork", links={"forked_from": original.run_id, "fork_step": 2}) as fork:
            for i, tool in enumerate(["ls", "read", "grep"]):
                with fork.step(f"step {i}") as step, step.tool_call(tool, {"i": i}) as call:
                    call.result("ok")
    return original.run_id, replay.run_id, fork.run_id


def test_divergence_of_a_replay(tmp_path: Path) -> None:
    db = tmp_path / "replays.duckdb"
    original, replay, fork = _replay_store(db)
    store = Store(db)
    assert first_divergence(load_actions(store, original), load_actions(store, fork)) is None
    assert first_divergence(load_actions(store, original), load_actions(store, replay)) == 3

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        assert app.screen.query_one(RunsTable).row_count == 1  # the replay and fork hang under the original
        await pilot.press("c")
        await settle(pilot)
        assert sorted(app.screen.query_one(RunsTable).keys()) == sorted([replay, fork])
        assert "↳replay orig" in screen_text(app) and "↳fork orig" in screen_text(app)
        await open_run(app, pilot, replay)
        await pilot.press("t")
        await settle(pilot)
        await pilot.press("d")
        text = screen_text(app)
        assert "diverges from the original at step 3" in text and "first divergence: 3" in text
        assert app.screen.query_one(Timeline).current_step == 3

        await pilot.press("x")  # the replay beside its original
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        table = app.screen.query_one(DiffTable)
        lines = screen_text(app).splitlines()
        assert any("replay of" in line and "steps: 3 beside 3, 2 alike" in line for line in lines)
        assert "first divergence: original step 3, this run's step 3" in screen_text(app)
        both = [line for line in lines if 'ls {"i":0}' in line]
        assert len(both) == 1 and both[0].count('ls {"i":0}') == 2  # the same action, side by side
        # grep (the original's step 3) and cat (the replay's) are not alike: one line, side by side.
        [grep] = [line for line in lines if 'grep {"i":2}' in line]
        assert "≠" in grep and 'cat {"i":2}' in grep
        assert table.current_pair is not None and not table.current_pair.same  # the cursor is on it
        await pilot.press("home", "d")
        assert table.current_key == str(table.first)
        await pilot.press("home", "enter")  # this run's step 1
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.run_id == replay and app.screen.step == 1
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        await pilot.press("d", "enter")  # the divergent line opens this run's side: cat
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.run_id == replay and app.screen.step == 3

    run_app(db, scenario)


def test_side_by_side_matches_runs_stored_with_differently_spaced_json(tmp_path: Path) -> None:
    """A run recorded by a looptrace that wrote '{"i": 0}' and its replay writing '{"i":0}' act alike."""
    db = tmp_path / "spacing.duckdb"
    now = datetime(2026, 1, 1)
    writer = SegmentWriter(db)
    runs = [{"run_id": r, "recorded_at": now, "started_at": now, "ended_at": now, "status": "ok", "agent": "a",
             "replay_of": "old" if r == "new" else None} for r in ("old", "new")]
    calls = [{"run_id": r, "step": i, "call_index": 0, "tool": "ls", "args": args, "observation": "ok",
              "observation_bytes": 2, "is_error": False, "started_at": now, "ended_at": now}
             for r, spaced in (("old", True), ("new", False)) for i in (1, 2)
             for args in [json.dumps({"i": i}, separators=(", ", ": ") if spaced else (",", ":"))]]
    steps = [{"run_id": r, "step": i, "started_at": now, "ended_at": now} for r in ("old", "new") for i in (1, 2)]
    writer.write({"run_records": runs, "tool_call_records": calls, "step_records": steps})
    store = Store(db)
    pair = load_diff(store, "new")
    assert pair is not None and pair.kind == "replay" and pair.diff.first_divergence is None
    assert pair.diff.common == 2
    assert first_divergence(load_actions(store, "old"), load_actions(store, "new")) is None


def test_sql_screen_runs_queries_and_refuses_copy(demo: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.csv"

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        await pilot.press("colon")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SqlScreen)
        editor = screen.query_one(TextArea)
        editor.text = "SELECT agent, status FROM runs ORDER BY agent"
        await pilot.press("ctrl+r")
        await settle(pilot)
        text = screen_text(app)
        assert "15 rows in" in text and "demo-orchestrator-worker" in text
        editor.text = f"COPY (SELECT * FROM runs) TO '{target}'"
        await pilot.press("ctrl+r")
        await settle(pilot)
        text = screen_text(app)
        assert "error: only queries are allowed" in text and "15 rows" not in text
        assert "demo-orchestrator-worker" not in text  # the old results are cleared
        editor.text = "SELECT * FROM read_csv('/etc/passwd')"
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert "error:" in screen_text(app)
        await pilot.press("f4")
        await settle(pilot)
        assert "15 rows in" in screen_text(app)  # the diagnoses example: one primary diagnosis per run
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen) and "Keys: sql" in screen_text(app)
        await pilot.press("escape", "escape")
        assert isinstance(app.screen, RunsScreen)

    run_app(demo, scenario)
    assert not target.exists()


# -- live ---------------------------------------------------------------------------------------


def test_live_refresh_shows_new_steps_without_moving_the_cursor(tmp_path: Path) -> None:
    db = tmp_path / "live.duckdb"
    proc = subprocess.Popen(
        [PYTHON, "-m", "tests.proc_agent", str(db), "live", "600", "1", "0.1"],  # stopped when seen growing
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=python_env(), cwd=ROOT,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().startswith("started")

        def shown_steps(app: ViewerApp) -> int:
            found = re.search(r"(\d+) steps ·", screen_text(app))
            return int(found.group(1)) if found else 0

        async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
            # No settle() here: with refresh on, some load is always about to start. Poll instead.
            deadline = time.monotonic() + 30  # generous for a loaded machine; typically a second or two

            async def wait_for(what: str, ready: Callable[[], bool]) -> None:
                while not ready():
                    assert time.monotonic() < deadline, what
                    await pilot.pause(0.1)

            table = app.screen.query_one(RunsTable)
            await wait_for("the run never showed up",
                           lambda: table.row_count > 0 and int(table.get_row_at(0)[6].plain or 0) >= 2)
            await pilot.press("enter")
            await wait_for("the run screen never loaded", lambda: shown_steps(app) >= 2)
            timeline = app.screen.query_one(Timeline)
            first = shown_steps(app)
            await pilot.press("down")
            assert timeline.current_step == 2
            await wait_for(f"steps did not grow past {first}", lambda: shown_steps(app) >= first + 3)
            assert timeline.current_step == 2 and timeline.row_count >= first + 3  # the cursor stayed put
            await pilot.press("escape")  # back on the runs table, which reloads when shown again
            await wait_for("the runs table did not refresh",
                           lambda: int(table.get_row_at(0)[table.get_column_index("steps")].plain) >= first + 3)

        run_app(db, scenario, refresh=0.5)
    finally:
        proc.terminate()
        proc.wait(30)


# -- snapshots ----------------------------------------------------------------------------------

SCREENS = ("runs", "run", "step", "replay", "sql", "help")


@pytest.fixture(scope="module")
def captures(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    out = tmp_path_factory.mktemp("captures")
    paths = asyncio.run(capture(demo, out))
    return {p.stem: mask(p.read_text(encoding="utf-8").replace(str(demo), "DB")) for p in paths}


@pytest.mark.parametrize("name", SCREENS)
def test_screen_snapshot(captures: dict[str, str], name: str) -> None:
    """Layout of each screen at 160x48, times and ids masked. LOOPTRACE_UPDATE_SNAPSHOTS=1 rewrites them."""
    _compare_snapshot(name, captures[name])


def test_side_by_side_snapshot(tmp_path: Path) -> None:
    """The diff screen, on a store with a replay (the demo has none)."""
    db = tmp_path / "replays.duckdb"
    _replay_store(db)
    paths = asyncio.run(capture(db, tmp_path / "captures"))
    [diff] = [p for p in paths if p.stem == "diff"]
    _compare_snapshot("diff", mask(diff.read_text(encoding="utf-8").replace(str(db), "DB")))


# The store's path in the breadcrumb, whole or cut with an ellipsis (a pytest-xdist worker's temp
# folder, popen-gwN/, makes it long enough to be cut): shown as DB, like the path replaced whole.
_BREADCRUMB_PATH = re.compile(r"^( looptrace  ›  )(?!DB  ›)\S+?(  ›  )", re.M)


def _compare_snapshot(name: str, text: str) -> None:
    text = _BREADCRUMB_PATH.sub(r"\1DB\2", text)
    path = SNAPSHOTS / f"viewer_{name}.txt"
    if os.environ.get("LOOPTRACE_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing {path}: run with LOOPTRACE_UPDATE_SNAPSHOTS=1 to create it"
    assert text == path.read_text(encoding="utf-8")


def test_a_run_whose_source_kept_no_model_calls_does_not_read_as_none_made(demo: Path, tmp_path: Path) -> None:
    """An imported transcript made model calls its file did not keep: the run's header said "0 model calls"."""
    from looptrace.tracer.ingest.files.importing import write_trajectories
    from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
    from looptrace.viewer.widgets.run_summary import summary_text

    db = tmp_path / "imported.duckdb"
    write_trajectories(Store(db), [Trajectory(source="t.json", agent="a", status="ok", steps=[
        ImportedStep(step=1, tool="ls", args={}, observation="a.txt"), ImportedStep(step=2, thought="Done.")])])
    [run] = list_runs(Store(db)).rows
    detail = load_run(Store(db), run.run_id)
    assert detail is not None and "2 steps · no model calls recorded" in summary_text(detail).plain
    traced = load_run(Store(demo), run_id_of(demo, "demo-healthy"))
    assert traced is not None and re.search(r"\d+ steps · [1-9]\d* model calls", summary_text(traced).plain)
