"""The viewer on a big store (10,000 runs, 1,000,000 steps), driven headless by Pilot as the tests do.

Three moments a user waits for: the first screen painted with its runs, a 1,000-step run's timeline
filled, and a step holding a 10 MB observation shown with its "bytes not shown" notice. Each is timed
in the real app (thread workers, message round trips, layout and paint) and, beside it, the
``viewer.data`` function the screen calls, alone. The baseline is the same question asked naively:
``SELECT *`` from the view, every row fetched, observations included, and a step's whole 10 MB
observation read.

The app runs with live refresh off, so a refresh cannot land inside a measurement; each round is a
fresh app and a fresh reader session, as when a user starts ``looptrace view``. Pilot waits for the
process to go idle in windows of 20 ms: ``press()`` returns after two such waits, and each timed
moment ends with one more ``pause()``, so the app figures include some 20-80 ms of this polling after
the last paint (measured: 20-60 ms for opening the 1,000-step run). So opening the long run is timed
to the last frame the app produced before Pilot saw it idle: every widget of the run screen drawn,
the layout settled (the scrollbar came). The figure to Pilot's idle is printed beside it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import RenderableType
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Static

from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.data import list_runs, load_run, load_step
from looptrace.viewer.screens import RunScreen, StepScreen
from looptrace.viewer.widgets import RunsTable, Timeline

from .bigstore import make_big_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "viewer_speed: the viewer on a big store (first screen, a 1,000-step run, a 10 MB step)"
SIZE = (160, 48)
GOAL_FIRST_MS = 1_500.0
GOAL_RUN_MS = 300.0
GOAL_STEP_MS = 1_000.0
LONG_RUN = "bench-long-run"  # 1,000 steps, second row of the runs table
BIG_RUN = "bench-big-observation"  # one step with a 10 MB observation, first row
LONG_STEPS = 1_000
BIG_BYTES = 10 * 1024 * 1024
_TIMEOUT = 60.0

# Both runs start after every generated one, so they head the runs table (newest first).
_EXTRA_RUNS = """
INSERT INTO run_records (run_id, recorded_at, source, agent, task, model, status, started_at, ended_at)
VALUES ($long, TIMESTAMP '2026-12-01', 'bench', 'long-agent', 'a run of many steps', 'claude-sonnet-4-5',
        'ok', TIMESTAMP '2026-12-01', TIMESTAMP '2026-12-01 02:00'),
       ($big, TIMESTAMP '2026-12-02', 'bench', 'big-agent', 'a run that read a huge log',
        'claude-sonnet-4-5', 'ok', TIMESTAMP '2026-12-02', TIMESTAMP '2026-12-02 00:01')
"""

_LONG_STEPS = """
INSERT INTO step_records (run_id, step, started_at, ended_at, thought, input_tokens, output_tokens,
                          context_tokens, cost_usd)
SELECT $long, i + 1, TIMESTAMP '2026-12-01' + INTERVAL (i) SECOND,
       TIMESTAMP '2026-12-01' + INTERVAL (i) SECOND, 'thinking about step ' || i, 1000 + i * 50, 80,
       1000 + i * 50, 0.004
FROM range($n) t(i)
"""

_LONG_CALLS = """
INSERT INTO tool_call_records (run_id, step, call_index, tool_call_id, tool, args, observation,
                               observation_bytes, is_error, error_type)
SELECT $long, i + 1, 0, 'toolu_long_' || i, 'read_file', '{"path": "src/f' || (i % 37) || '.py"}',
       'contents of file ' || (i % 37) || ' ' || repeat('x', 400), 420, false, NULL
FROM range($n) t(i)
"""

_BIG_STEP = """
INSERT INTO step_records (run_id, step, started_at, ended_at, thought, input_tokens, output_tokens,
                          context_tokens, cost_usd)
VALUES ($big, 1, TIMESTAMP '2026-12-02', TIMESTAMP '2026-12-02', 'read the whole log', 5000, 80, 5000,
        0.02)
"""

# Log-like lines, cut to exactly BIG_BYTES (ASCII, so characters are bytes).
_BIG_CALL = """
INSERT INTO tool_call_records (run_id, step, call_index, tool_call_id, tool, args, observation,
                               observation_bytes, is_error, error_type)
SELECT $big, 1, 0, 'toolu_big', 'read_file', '{"path": "build.log"}', obs, strlen(obs), false, NULL
FROM (SELECT left(repeat('2026-12-02 00:00:00 INFO compiling module and writing object files\n',
                         $reps), $bytes) AS obs)
"""

_NAIVE_RUNS = "SELECT * FROM runs"
_NAIVE_RUN = "SELECT * FROM steps WHERE run_id = ? ORDER BY step, call_index"
_NAIVE_OBSERVATION = "SELECT observation FROM steps WHERE run_id = ? AND step = ?"


def _make_store(path: Path, runs: int) -> Store:
    make_big_store(path, runs=runs)
    store = Store(path)
    with store.writer() as conn:
        conn.execute(_EXTRA_RUNS, {"long": LONG_RUN, "big": BIG_RUN})
        conn.execute(_LONG_STEPS, {"long": LONG_RUN, "n": LONG_STEPS})
        conn.execute(_LONG_CALLS, {"long": LONG_RUN, "n": LONG_STEPS})
        conn.execute(_BIG_STEP, {"big": BIG_RUN})
        conn.execute(_BIG_CALL, {"big": BIG_RUN, "reps": BIG_BYTES // 60 + 1, "bytes": BIG_BYTES})
        conn.execute("CHECKPOINT")
    return store


@dataclass(frozen=True)
class _AppTimes:
    first_ms: float
    run_ms: float  # until the last frame of the long run's screen
    run_idle_ms: float  # until Pilot saw the app idle after that
    step_ms: float


class _Frames:
    """When the app produced each frame (``App._display`` with an update, as it writes to the
    terminal; headless, nothing is written): a bench-only wrapper, so a timed moment can end at the
    last frame before Pilot saw the app idle, not at Pilot's polling."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._original = App._display

    def __enter__(self) -> _Frames:
        original, times = self._original, self.times

        def display(app: App[None], screen: Screen[None], renderable: RenderableType | None) -> None:
            if renderable is not None:
                times.append(time.perf_counter())
            original(app, screen, renderable)

        App._display = display  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        App._display = self._original  # type: ignore[method-assign]

    def last_between(self, start: float, end: float) -> float:
        return max((t for t in self.times if start <= t <= end), default=end)


async def _until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the viewer did not show {what} within {_TIMEOUT:.0f} s")
        await pilot.pause()
    await pilot.pause()  # one more turn: the rows just added are laid out and painted


def _step_text(app: ViewerApp) -> str:
    content = app.screen.query_one("#step-text", Static).content
    return getattr(content, "plain", str(content))


async def _open(pilot: Pilot[None], table: RunsTable | Timeline, key: str,
                shown: Callable[[], bool], what: str) -> tuple[float, float]:
    """When enter was pressed on ``key`` (a perf_counter), and milliseconds from then until ``shown()``."""
    assert table.move_to_key(key), f"{key} is not in the table"
    await pilot.pause()
    started = time.perf_counter()
    await pilot.press("enter")
    await _until(pilot, shown, what)
    return started, (time.perf_counter() - started) * 1e3


async def _app_session(store: Store) -> _AppTimes:
    started = time.perf_counter()
    app = ViewerApp(store.path, refresh_seconds=None)
    async with app.run_test(size=SIZE) as pilot:
        def runs_shown() -> bool:
            tables = app.screen.query(RunsTable)
            return bool(tables) and tables.first().row_count > 0

        await _until(pilot, runs_shown, "the runs table's rows")
        first_ms = (time.perf_counter() - started) * 1e3

        def timeline_full() -> bool:
            screen = app.screen
            return isinstance(screen, RunScreen) and screen.query_one(Timeline).row_count == LONG_STEPS

        with _Frames() as frames:
            pressed, run_idle_ms = await _open(pilot, app.screen.query_one(RunsTable), LONG_RUN, timeline_full,
                                               f"{LONG_STEPS:,} timeline rows")
        run_ms = (frames.last_between(pressed, pressed + run_idle_ms / 1e3) - pressed) * 1e3
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, RunScreen), "the runs screen again")

        def big_run_shown() -> bool:
            return isinstance(app.screen, RunScreen) and app.screen.query_one(Timeline).row_count == 1

        await _open(pilot, app.screen.query_one(RunsTable), BIG_RUN, big_run_shown, "the big run")

        def step_shown() -> bool:
            if not isinstance(app.screen, StepScreen):
                return False
            text = _step_text(app)
            return "bytes not shown" in text and "INFO compiling module" in text

        _, step_ms = await _open(pilot, app.screen.query_one(Timeline), "1", step_shown,
                                 "the 10 MB step with its notice")
    return _AppTimes(first_ms, run_ms, run_idle_ms, step_ms)


def _ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1e3


@dataclass(frozen=True)
class _Round:
    app: _AppTimes
    data: tuple[float, float, float]  # list_runs, load_run, load_step alone


async def _with_timeout(work: Awaitable[_AppTimes]) -> _AppTimes:
    return await asyncio.wait_for(work, timeout=4 * _TIMEOUT)


def _looptrace(store: Store) -> _Round:
    app = asyncio.run(_with_timeout(_app_session(store)))
    data = (_ms(lambda: list_runs(store)), _ms(lambda: load_run(store, LONG_RUN)),
            _ms(lambda: load_step(store, BIG_RUN, 1)))
    return _Round(app, data)


def _baseline(store: Store) -> tuple[float, float, float]:
    def fetch(sql: str, params: list[object]) -> None:
        with store.reader() as conn:
            conn.execute(sql, params).fetchall()

    return (_ms(lambda: fetch(_NAIVE_RUNS, [])), _ms(lambda: fetch(_NAIVE_RUN, [LONG_RUN])),
            _ms(lambda: fetch(_NAIVE_OBSERVATION, [BIG_RUN, 1])))


def run(quick: bool = False) -> list[Result]:
    runs = 1_000 if quick else 10_000
    rounds = 3 if quick else 5
    with scratch_dir("viewer") as tmp:
        store = _make_store(tmp / "big.duckdb", runs)
        _looptrace(store), _baseline(store)  # warm-up: the file's pages in the OS cache, lazy imports
        ours, theirs = alternate(rounds, lambda: _looptrace(store), lambda: _baseline(store))
    first = median([r.app.first_ms for r in ours])
    open_run = median([r.app.run_ms for r in ours])
    open_run_idle = median([r.app.run_idle_ms for r in ours])
    open_step = median([r.app.step_ms for r in ours])
    data = [median([r.data[i] for r in ours]) for i in range(3)]
    naive = [median([t[i] for t in theirs]) for i in range(3)]
    size = f"{runs:,} runs x 100 steps + a run of {LONG_STEPS:,} steps + a step of {BIG_BYTES >> 20} MB"
    return [
        Result("first screen painted", "ms", first, naive[0], f"looptrace < {GOAL_FIRST_MS:,.0f} ms",
               first < GOAL_FIRST_MS,
               note=f"{size}; medians of {rounds} alternating rounds; baseline: `{_NAIVE_RUNS}` fetched "
                    f"whole; list_runs alone {data[0]:.0f} ms"),
        Result(f"open a {LONG_STEPS:,}-step run", "ms", open_run, naive[1],
               f"looptrace < {GOAL_RUN_MS:,.0f} ms", open_run < GOAL_RUN_MS,
               note=f"enter on the run until the last frame of its screen, every row in the timeline; until "
                    f"Pilot then saw the app idle: {open_run_idle:.0f} ms; baseline: every steps row of the run, "
                    "observations included"),
        Result("  of which load_run alone", "ms", data[1], naive[1], f"looptrace < {GOAL_RUN_MS:,.0f} ms",
               data[1] < GOAL_RUN_MS),
        Result("open a 10 MB step", "ms", open_step, naive[2], f"looptrace < {GOAL_STEP_MS:,.0f} ms",
               open_step < GOAL_STEP_MS,
               note=f"enter on the step until its text and the bytes-not-shown notice show; load_step "
                    f"alone {data[2]:.0f} ms; baseline: `SELECT observation` of all {BIG_BYTES:,} bytes"),
    ]
