"""Unknown tokens and cost stay NULL in the documented views, and the viewer shows ``-`` (issue 28).

An OpenAI-style ``{messages}`` transcript records no usage: ``runs`` and ``steps`` used to show
``input_tokens 0`` and ``cost_usd 0``, and the viewer ``tokens 0  $0.0000``. Imported with the real
importer into a real store, read through the views and through the real app.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store
from looptrace.viewer.app import ViewerApp
from looptrace.viewer.capture import screen_text, settle
from looptrace.viewer.screens import RunScreen
from looptrace.viewer.widgets import RunsTable

from .conftest import query

TRANSCRIPT = {
    "model": "gpt-4o-mini",
    "tools": [{"type": "function", "function": {"name": "search"}}],
    "messages": [
        {"role": "user", "content": "Find cats."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "cats"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "3 cats"},
        {"role": "assistant", "content": "Three cats."},
    ],
}


def test_a_transcript_without_usage_keeps_null_tokens_and_cost(tmp_path: Path, db: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "chat.json").write_text(json.dumps(TRANSCRIPT))
    report = import_paths(Store(db), [tmp_path / "in"])
    assert report.runs_imported == 1
    assert query(db, "SELECT n_steps, input_tokens, output_tokens, cost_usd FROM runs") == [(2, None, None, None)]
    assert query(db, "SELECT step, input_tokens, output_tokens, cost_usd FROM steps ORDER BY step") == [
        (1, None, None, None), (2, None, None, None)]
    assert query(db, "SELECT sum(input_tokens), sum(cost_usd) FROM steps") == [(None, None)]
    [(run_id,)] = query(db, "SELECT run_id FROM runs")

    async def main() -> None:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            row = [c.plain for c in app.screen.query_one(RunsTable).get_row_at(0)]
            assert row[7:9] == ["-", "-"]  # tokens, cost
            await pilot.press("enter")
            await settle(pilot)
            assert isinstance(app.screen, RunScreen) and app.screen.run_id == run_id
            text = screen_text(app)
            assert "tokens - in / - out · - ·" in text
            assert "$0.0000" not in text and "tokens 0" not in text

    asyncio.run(main())



def test_the_report_says_unknown_rather_than_zero(tmp_path: Path, db: Path) -> None:
    from looptrace.replay.report import write_run

    (tmp_path / "chat.json").write_text(json.dumps(TRANSCRIPT))
    import_paths(Store(db), [tmp_path / "chat.json"])
    [(run_id,)] = query(db, "SELECT run_id FROM runs")
    write_run(Store(db), run_id, tmp_path / "run.html")
    html = (tmp_path / "run.html").read_text()
    assert "<dt>tokens</dt><dd>— in, — out</dd><dt>cost</dt><dd>unknown</dd>" in html
    assert "$0.0000" not in html and "· 0 in / 0 out" not in html
