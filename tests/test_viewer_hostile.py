"""Hostile trace text in the viewer: markup shown literally, terminal controls shown as escapes.

A model or tool can write anything into a thought, an observation, tool arguments or a task:
Rich/Textual markup that would run actions or open links, escape sequences that set the window
title or clear the screen, C1 controls, bidi overrides. Every screen must show them as text.
"""

from __future__ import annotations

import asyncio
import os
import pty
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest
from textual.widgets import TextArea

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer import Tracing
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import SIZE, screen_text, settle
from looptrace.viewer.screens import DiffScreen, HelpScreen, ReplayScreen, RunScreen, SqlScreen, StepScreen

from .conftest import PYTHON, ROOT, python_env

MARKUP = ("[/bold]", "[@click=app.quit]x[/]", "[link=file:///etc/passwd]y[/]")
CONTROLS = ("\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\u202eevil")
SHOWN = ("\\x1b]0;pwned\\x07", "\\x1b[2J", "\\x9b31m", "\\u202eevil")
HOSTILE = "\n".join(MARKUP + CONTROLS)
# What must never reach a widget raw: C0 (but tab and newline), DEL, C1, bidi controls.
_UNSAFE = {chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0))} | set(
    "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def hostile_store(db: Path) -> str:
    with Tracing(db) as tracing:
        task = "MARK " + " ".join(MARKUP + CONTROLS)
        with tracing.run("[bold]agent[/]", task=task, model="[red]m[/]") as run:
            for tool in ("[@click=app.quit]t[/]", "\x1b]0;pwned\x07"):  # unknown tools, named by a diagnosis
                with run.step(HOSTILE) as step:
                    with step.tool_call(tool, {"x": MARKUP[2], "esc": CONTROLS[1]}) as call:
                        call.error("tool_not_found", HOSTILE)
            with run.step(HOSTILE) as step:
                with step.tool_call("read", {"path": CONTROLS[0]}) as call:
                    call.result(HOSTILE)
            run.finish("error", error=HOSTILE)
    analyze_store(Store(db))
    return run.run_id


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("hostile") / "hostile.duckdb"
    return db, hostile_store(db)


def check(text: str, *expected: str) -> None:
    assert not _UNSAFE & set(text), sorted(_UNSAFE & set(text))
    for part in expected:
        assert part in text, part


def test_every_screen_shows_hostile_text_literally(hostile: tuple[Path, str]) -> None:
    db, run_id = hostile

    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            check(screen_text(app), "[bold]agent[/]", "MARK [/bold] [@click=app.qu", "[red]m[/]")
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen)
            check(screen_text(app), "[@click=app.quit]t[/]", "x=[link=file:///etc/passw",
                  "path=\\x1b]0;pwned\\x07", "[link=file:///etc/passwd]y[/]", *SHOWN, "hallucinated_tool",
                  '"[@click=app.quit]t[/]"]')
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, StepScreen)
            check(screen_text(app), *MARKUP, *SHOWN, '"x": "[link=file:///etc/passwd]y[/]"')
            await pilot.press("escape", "t")
            await settle(pilot)
            assert isinstance(app.screen, ReplayScreen)
            check(screen_text(app), *MARKUP, *SHOWN)
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape", "escape", "escape", "colon")
            await settle(pilot)
            assert isinstance(app.screen, SqlScreen)
            app.screen.query_one(TextArea).text = (
                'SELECT thought AS "[@click=app.quit]col[/]", observation FROM steps WHERE step = 2')
            await pilot.press("ctrl+r")
            await settle(pilot)
            check(screen_text(app), "[@click=app.quit]col[/]", "[/bold]\\n[@click=app.quit]x[/]\\n",
                  "\\x1b]0;pwned")
            assert app.is_running  # no markup action ran (app.quit would have stopped it)

    asyncio.run(main())


def test_the_side_by_side_view_shows_hostile_actions_literally(tmp_path: Path) -> None:
    db = tmp_path / "hostile-pair.duckdb"
    with Tracing(db) as tracing:
        with tracing.run("agent", task="original") as original:
            with original.step("s") as step, step.tool_call(MARKUP[1], {"x": MARKUP[2], "esc": CONTROLS[1]}) as call:
                call.result("ok")
        with tracing.run("agent", task="replay", links={"replay_of": original.run_id}) as replay:
            with replay.step("s") as step, step.tool_call(CONTROLS[0], {"bidi": CONTROLS[3]}) as call:
                call.result("ok")

    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.push_screen(DiffScreen(app.store, replay.run_id))
            await settle(pilot)
            check(screen_text(app), "[@click=app.quit]x[/]", "[link=file:///etc/passwd]y[/]",
                  "\\x1b]0;pwned\\x07", "\\u202eevil", "first divergence: original step 1")
            assert app.is_running  # no markup action ran

    asyncio.run(main())


@pytest.mark.slow
def test_no_escape_sequence_from_the_data_reaches_the_terminal(hostile: tuple[Path, str]) -> None:
    """The real CLI in a pseudo-terminal: Textual writes its own escape sequences, never the data's."""
    db, _ = hostile
    pid, fd = pty.fork()
    if pid == 0:  # the child: the viewer, as a user would start it
        env = python_env() | {"TERM": "xterm-256color", "COLUMNS": "160", "LINES": "48"}
        os.chdir(ROOT)
        os.execve(PYTHON, [PYTHON, "-m", "looptrace.tracer.cli", "view", str(db), "--refresh", "0"], env)
    out = bytearray()

    def read_until(marker: bytes, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while marker not in out and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    return
                if not chunk:
                    return
                out.extend(chunk)

    try:
        read_until(b"MARK", 10.0)  # the runs table, with the hostile task
        read_until(b"\xff", 0.5)  # whatever else the first frames bring
        os.write(fd, b"\r")  # open the run: its timeline and summary show the hostile text
        read_until(b"path=", 5.0)
        read_until(b"\xff", 0.5)
        os.write(fd, b"q")
        read_until(b"\xff", 5.0)  # until the viewer exits and the terminal closes
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    text = out.decode("utf-8", "replace")
    assert "MARK" in text and "pwned" in text, "the hostile run was not displayed"
    assert "\x1b]0;pwned" not in text and "pwned\x07" not in text
    assert "\x9b" not in text and "\u202e" not in text  # C1 CSI, bidi override: as characters
    # Textual clears the screen itself; the data's clear-screen follows its own text, always escaped.
    assert "esc=\x1b[2J" not in text and "\\x1b[2J" in text


def test_cli_view_refuses_a_missing_store(tmp_path: Path) -> None:
    result = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "view", str(tmp_path / "none.duckdb")],
                            capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=60)
    assert result.returncode == 1 and "no such store" in result.stderr
