"""The step screen shows the redaction manifest: which field, which rule, never the value."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot

from looptrace.tracer import Tracing
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.data import load_step
from looptrace.viewer.screens import StepScreen

from .test_viewer import open_run, run_app

SECRET = "sk-ant-api03-VIEWERplanted0123456789abcdef"


def _store(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "traces.duckdb"
    with Tracing(db) as tracing, tracing.run("redacted", task="deploy") as run:
        with run.step("plain step") as step, step.tool_call("ls", {"path": "."}) as call:
            call.result("a b")
        with run.step(f"use {SECRET}") as step, step.tool_call("fetch", {"headers": {"X-Api-Key": SECRET}}) as call:
            call.result(f"DB_PASSWORD=hunter2-{SECRET[-8:]}")
        run_id = run.run_id
    return db, run_id


def test_load_step_carries_the_manifest(tmp_path: Path) -> None:
    db, run_id = _store(tmp_path)
    plain, redacted = load_step(Store(db), run_id, 1), load_step(Store(db), run_id, 2)
    assert plain is not None and plain.redactions == ()
    assert redacted is not None
    fields = {(f, rule) for f, rule, _ in redacted.redactions}
    assert ("args.headers.X-Api-Key", "secret_key") in fields
    assert ("thought", "anthropic_key") in fields and ("observation", "secret_key") in fields
    assert not any(SECRET in f for f, _, _ in redacted.redactions)


def test_the_step_screen_lists_what_was_redacted(tmp_path: Path) -> None:
    db, run_id = _store(tmp_path)

    async def scenario(app: ViewerApp, pilot: Pilot[None]) -> None:
        await open_run(app, pilot, run_id)
        await pilot.press("down", "enter")
        await settle(pilot)
        assert isinstance(app.screen, StepScreen) and app.screen.step == 2
        text = screen_text(app)
        assert "redacted" in text and "args.headers.X-Api-Key" in text and "anthropic_key" in text
        assert SECRET not in text

    run_app(db, scenario)
