"""Tables and help at 80x24, 100x30 and 120x40 (the runs table also at 160): whole columns in their
priority, never a cut heading.

Issue 40 found, over the demo store: the help screen at 80x24 hiding 42 of its words below the box,
the runs table cutting agent names to 14 characters (demo-context-overflow and demo-context-defended
alike), a ``du`` heading for duration at 100 columns, the run screen's step list running on under the
diagnosis pane at 120x40 (a ``cont`` heading) while its header wrapped a date from its time, and
``output_tokens`` split over two lines by ``looptrace sql``. One Pilot app per size reads each screen
as text; the CLI's lists are read from the real commands.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.pilot import Pilot
from textual.widgets import DataTable, TextArea

from looptrace.loop.scenarios import SCENARIOS
from looptrace.tracer.cli.main import main
from looptrace.tracer.ingest.files.listing import BUILT_IN
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.columns import Column, fit_columns
from looptrace.viewer.screens import HelpScreen, RunScreen, RunsScreen, SqlScreen, UsageScreen
from looptrace.viewer.widgets import ResultsTable, RunsTable, Timeline
from looptrace.viewer.widgets.runs_table import RUN_COLUMNS
from looptrace.viewer.widgets.timeline import LAYOUT

from .conftest import PYTHON, ROOT, python_env
from .test_viewer import run_id_of

SIZES = [(80, 24), (100, 30), (120, 40)]
SCENARIO_TASKS = {s.name: s.task for s in SCENARIOS}
QUERY = "SELECT run_id, step, input_tokens, output_tokens, context_tokens, cost_usd, tool FROM steps LIMIT 5"


# -- the rule, as a pure function ------------------------------------------------------------------

def _cols(*specs: tuple[str, float, int, int]) -> list[Column]:
    """(heading, priority, least, widest cell) -> columns keyed by heading."""
    return [Column(h, h, p, least, natural=n) for h, p, least, n in specs]


@pytest.mark.parametrize(("width", "expected"), [
    (200, {"status": 16, "agent": 23, "task": 40, "duration": 8}),  # room for all, each as wide as it wants
    (60, {"status": 16, "agent": 23, "duration": 8}),  # the task (least important) hidden whole
    (50, {"status": 16, "agent": 23}),  # then the duration: never 'du'
    (40, {"status": 16, "agent": 20}),  # the agent cut to what is left, no less than its least ...
    (30, {"status": 16, "duration": 8}),  # ... or hidden, and the narrower duration shows past it
    (10, {"status": 16}),  # the most important column shows even alone too wide (the table scrolls)
])
def test_columns_are_hidden_whole_in_priority_order(width: int, expected: dict[str, int]) -> None:
    columns = _cols(("status", 0, 0, 16), ("agent", 1, 16, 23), ("task", 3, 16, 40), ("duration", 2, 0, 5))
    assert fit_columns(columns, width) == expected


def test_a_heading_is_never_cut_and_a_narrow_column_shows_past_a_hidden_wide_one() -> None:
    columns = _cols(("step", 0, 0, 3), ("arguments", 1, 4, 60), ("observation_bytes", 2, 4, 3), ("x", 3, 0, 1))
    # 'arguments' wants 60: it takes what is left (>= its least); the long heading's column is hidden
    # rather than shown as 'observ'; nothing is left for 'x'.
    assert fit_columns(columns, 40) == {"step": 4, "arguments": 32}
    # Too little left for 'arguments' at its least (the heading is 9): hidden, and 'x' fits after it.
    assert fit_columns(_cols(("step", 0, 0, 3), ("arguments", 1, 4, 60), ("x", 3, 0, 1)), 15) == {"step": 4, "x": 1}



@pytest.mark.parametrize(("width", "expected"), [
    (57, {"task": 30, "model": 16, "steps": 5}),  # in its turn the task takes its ample width: all fit
    (56, {"task": 36, "model": 16}),  # one cell less: the last column hidden whole, its room to the task
    (80, {"task": 53, "model": 16, "steps": 5}),  # what the others leave goes to the task ...
    (200, {"task": 80, "model": 16, "steps": 5}),  # ... up to its widest cell
])
def test_an_ample_column_takes_its_share_then_what_is_left(width: int, expected: dict[str, int]) -> None:
    """A run's task is a long text: 28 cells in its turn once cut everything before layout, even on a wide
    terminal. Its ample width is what it takes in its turn; the room the other columns leave is its too."""
    columns = [Column("task", "task", 1, least=16, ample=30, natural=80), Column("model", "model", 2, natural=16),
               Column("steps", "steps", 3, natural=3)]
    assert fit_columns(columns, width, gap=2) == expected

# -- the real app at three sizes -------------------------------------------------------------------

def _help_is_whole(app: ViewerApp, width: int) -> None:
    """Every word of the help screen on screen at once: keys, their descriptions, the notes."""
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    text = screen_text(app)
    assert all(cell_len(line) <= width for line in text.splitlines())
    shown = text.split()
    words = [w for key, description in screen.rows for w in (key, *description.split())] + screen.about.split()
    missing = [w for w in words if w not in shown]
    assert not missing, (missing, text)


def _heading_tokens(line: str) -> list[str]:
    return [t for t in line.split() if t not in ("▼", "▲")]


def _headings_whole(table: DataTable[object]) -> None:
    for column in table.ordered_columns:
        assert column.get_render_width(table) - 2 * table.cell_padding >= cell_len(column.label.plain), column.label


def _run_at(db: Path, size: tuple[int, int]) -> None:
    width = size[0]
    overflow, defended = run_id_of(db, "demo-context-overflow"), run_id_of(db, "demo-context-defended")

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        # The runs table: the two demo-context agents told apart, headings whole.
        table = app.screen.query_one(RunsTable)
        text = screen_text(app)
        lines = text.splitlines()
        header = next(line for line in lines if line.lstrip().startswith("started"))
        assert set(_heading_tokens(header)) <= {c.heading for c in RUN_COLUMNS}, header
        _headings_whole(table)
        rows = {key: [c.plain for c in table.get_row(key)] for key in (overflow, defended)}
        agent = table.get_column_index("agent")
        assert rows[overflow][agent] == "demo-context-overflow" and rows[defended][agent] == "demo-context-defended"
        assert "demo-context-overflow" in text and "demo-context-defended" in text
        if width >= 120:
            assert "task" in _heading_tokens(header)

        await pilot.press("question_mark")
        await settle(pilot)
        _help_is_whole(app, width)
        await pilot.press("escape")

        # The run screen: the step list's columns whole and inside its pane; the header's fields whole.
        assert table.move_to_key(overflow)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, RunScreen)
        text = screen_text(app)
        assert re.search(r"started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text), text  # date and time on one line
        timeline = app.screen.query_one(Timeline)
        header = next(line for line in text.splitlines() if line.lstrip().startswith("step "))
        left = header.split("│")[0]
        assert set(left.split()) <= {c.heading for c in LAYOUT if c.heading}, left
        assert timeline.virtual_size.width <= timeline.scrollable_content_region.width  # nothing under the pane
        assert timeline.shown_columns[:4] == ["step", "mark", "err", "tool"]
        await pilot.press("question_mark")
        await settle(pilot)
        _help_is_whole(app, width)
        await pilot.press("escape", "escape")

        # The SQL screen: output_tokens whole, and what did not fit named.
        await pilot.press("colon")
        await settle(pilot)
        assert isinstance(app.screen, SqlScreen)
        app.screen.query_one(TextArea).text = QUERY
        await pilot.press("ctrl+r")
        await settle(pilot)
        results = app.screen.query_one(ResultsTable)
        _headings_whole(results)
        text = screen_text(app)
        header = next(line for line in text.splitlines() if line.lstrip().startswith("run_id"))
        shown = header.split()
        assert "output_tokens" in shown and set(shown) <= {c.heading for c in results.columns_all}
        hidden = results.hidden
        assert sorted(shown + hidden) == sorted(c.heading for c in results.columns_all)
        status = next(line for line in text.splitlines() if " rows in " in line)
        assert all(h in status for h in hidden), (hidden, status)
        await pilot.press("f1")
        await settle(pilot)
        _help_is_whole(app, width)
        await pilot.press("escape", "escape")

        assert isinstance(app.screen, RunsScreen)
        if width == 100:  # narrowed while open: laid out again for the new width
            await pilot.resize_terminal(80, 24)
            await settle(pilot)
            await pilot.pause(0.1)
            header = next(line for line in screen_text(app).splitlines() if line.lstrip().startswith("started"))
            assert _heading_tokens(header) == ["started", "agent", "status", "diagnosis"], header
            assert table.virtual_size.width <= 80
        # The usage screen's tables: headings whole (at the narrowest only: its roll-ups take seconds).
        if width > 80:
            return
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, UsageScreen)
        for usage in app.screen.query(DataTable):
            _headings_whole(usage)
        assert "demo-context-overflow" in screen_text(app)

    async def run() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await scenario(app, pilot)

    asyncio.run(run())


# What the runs table shows of the demo store as the terminal widens. The task (what the run was asked)
# comes right after the agent: last round it was the second to go, and 120 columns did not show it.
RUNS_AT = {
    80: ["started", "agent", "status", "diagnosis"],
    120: ["started", "agent", "task", "status", "diagnosis", "steps", "sub"],
    160: [c.heading for c in RUN_COLUMNS],
}


def test_the_runs_table_shows_the_task_from_120_columns(demo: Path) -> None:
    overflow = run_id_of(demo, "demo-context-overflow")

    async def run() -> None:
        app = ViewerApp(demo, refresh_seconds=None)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot)
            table = app.screen.query_one(RunsTable)
            for width, expected in RUNS_AT.items():
                await pilot.resize_terminal(width, 24)
                await settle(pilot)
                await pilot.pause(0.1)
                lines = screen_text(app).splitlines()
                header = next(line for line in lines if line.lstrip().startswith("started"))
                assert _heading_tokens(header) == expected, (width, header)
                _headings_whole(table)
                assert table.virtual_size.width <= width
                if "task" in expected:  # the task's cell, as far as its column goes
                    task = table.get_row(overflow)[table.get_column_index("task")].plain
                    assert task.startswith("Find every warning"), task
                    assert any(task in line and "demo-context-overflow" in line for line in lines)
            await pilot.resize_terminal(220, 24)  # wider than every column wants: the task whole
            await settle(pilot)
            await pilot.pause(0.1)
            task = table.get_row(overflow)[table.get_column_index("task")].plain
            assert task == SCENARIO_TASKS["context-overflow"], task

    asyncio.run(run())


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_table_and_help_reads_whole(demo: Path, size: tuple[int, int]) -> None:
    _run_at(demo, size)


# -- the CLI ---------------------------------------------------------------------------------------

def _flat(text: str) -> str:
    """Help text with its line breaks undone (argparse also breaks after a hyphen)."""
    return " ".join(re.sub(r"-\n\s+", "-", text).split())


def test_help_lists_every_importer_of_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    env = {**python_env(), "COLUMNS": "80"}
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "--help"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    top = _flat(done.stdout)
    with pytest.raises(SystemExit):
        main(["import", "--help"])
    command = capsys.readouterr().out
    assert all(len(line) <= 80 for line in command.splitlines())
    for fmt in BUILT_IN:
        assert fmt.label in top, fmt.label
        assert fmt.label in _flat(command), fmt.label
    assert "Codex CLI" in top and "Gemini CLI" in top


def test_formats_are_listed_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "--formats"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names[: len(BUILT_IN)] == [f.name for f in BUILT_IN]
    starts = {len(line) - len(line[len(name):].lstrip()) for name, line in zip(names, lines)}
    assert len(starts) == 1, starts  # every description starts in the same column


def test_sql_at_80_columns_keeps_headings_whole(demo: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["sql", "--db", str(demo), QUERY.replace(", tool", "")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["run_id", "step", "input_tokens", "output_tokens", "context_tokens", "cost_usd"]
    assert all(len(line) <= 80 for line in out)
