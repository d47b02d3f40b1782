"""Plain-text captures of every screen: ``python -m viewer.capture DB OUTDIR``.

Drives the real app headless at a fixed size (as the tests do) and writes what each screen shows,
as text lines read from the screen's compositor, to ``OUTDIR/{runs,run,step,replay,sql,help}.txt``,
and ``diff.txt`` when the store holds a replay or fork.
The README points at these; the snapshot tests compare the same text, with volatile parts masked.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.worker import WorkerCancelled, WorkerState

__all__ = ["screen_text", "settle", "mask", "capture", "SIZE"]

SIZE = (160, 48)

# Parts of a capture that change from one store to the next: times, ids, durations.
_VOLATILE = (
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"), "YYYY-MM-DD hh:mm:ss"),
    (re.compile(r"\b\d\d-\d\d \d\d:\d\d\b"), "MM-DD hh:mm"),
    (re.compile(r"\b[0-9a-f]{8,32}\b"), lambda m: "#" * len(m.group())),
    (re.compile(r"toolu_[0-9a-zA-Z]+"), lambda m: "toolu_" + "#" * (len(m.group()) - 6)),
    # Durations vary in length too, so they and the padding before them become one "~".
    (re.compile(r" *\b\d+(\.\d+)?(s|m\d\ds| ms| s)(?=\W|$)"), " ~"),
)


def screen_text(app: App[Any]) -> str:
    """What the current screen shows, as plain text lines (trailing spaces removed)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join(strip.text.rstrip() for strip in strips)


def mask(text: str) -> str:
    for pattern, repl in _VOLATILE:
        text = pattern.sub(repl, text)  # type: ignore[arg-type]
    return text


async def settle(pilot: Pilot[Any], timeout: float = 30.0) -> None:
    """Wait until the screen has shown what it loads: no worker running, no load in flight."""
    from .screens.base import ViewerScreen

    deadline = time.monotonic() + timeout
    await pilot.pause()
    while time.monotonic() < deadline and (
        any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers)
        or (isinstance(pilot.app.screen, ViewerScreen) and pilot.app.screen.busy)
    ):
        try:
            await pilot.app.workers.wait_for_complete()
        except WorkerCancelled:  # superseded by a newer load of the same group: that one counts
            pass
        await pilot.pause()
    await pilot.pause()


async def capture(db: str | Path, outdir: str | Path, *, size: tuple[int, int] = SIZE) -> list[Path]:
    from .app import ViewerApp
    from .screens import RunsScreen
    from .widgets import RunsTable

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    app = ViewerApp(db, refresh_seconds=None)

    async def save(name: str, pilot: Pilot[Any]) -> None:
        await settle(pilot)
        path = out / f"{name}.txt"
        path.write_text(screen_text(pilot.app) + "\n", encoding="utf-8")
        written.append(path)

    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await save("runs", pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        page = screen.page
        # The most telling run: a diagnosed failure if there is one.
        rows = page.rows if page else []
        pick = next((r for r in rows if r.label not in (None, "ok")), rows[0] if rows else None)
        if pick is None:
            return written
        app.screen.query_one(RunsTable).move_to_key(pick.run_id)
        await pilot.press("enter")
        await save("run", pilot)
        await pilot.press("e", "enter")
        await save("step", pilot)
        await pilot.press("escape", "t")
        await settle(pilot)
        await pilot.press("r")
        await save("replay", pilot)
        await pilot.press("escape", "escape", "escape", "colon")
        await settle(pilot)
        await pilot.press("ctrl+r")
        await save("sql", pilot)
        await pilot.press("escape", "question_mark")
        await save("help", pilot)
        derived = _derived_run(app)
        if derived is not None:  # a replay or fork: it beside its original
            from .screens import DiffScreen

            await pilot.press("escape")
            app.push_screen(DiffScreen(app.store, derived))
            await save("diff", pilot)
    return written


def _derived_run(app: Any) -> str | None:
    """The first replay or fork in the store, if any."""
    with app.store.reader() as conn:
        row = conn.execute("SELECT run_id FROM runs WHERE replay_of IS NOT NULL OR forked_from IS NOT NULL "
                           "ORDER BY started_at, run_id LIMIT 1").fetchone()
    return str(row[0]) if row else None


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m viewer.capture DB OUTDIR", file=sys.stderr)
        return 2
    for path in asyncio.run(capture(args[0], args[1])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
