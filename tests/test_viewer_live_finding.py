"""The runs table says what a run still going is doing wrong now: "same call 5x since step 1"."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from looptrace.tracer.ingest.otlp.live import preview_rows
from looptrace.tracer.sink import Sink
from looptrace.tracer.store import Store
from looptrace.viewer.data import list_runs
from looptrace.viewer.widgets.runs_table import run_cells


def _preview(sink: Sink, run_id: str, paths: list[str]) -> None:
    """A running run (its root span open) whose steps each read ``paths[i]`` and got the same answer."""
    run = {"run_id": run_id, "agent": "reader", "recorded_at": datetime(2026, 1, 1), "status": None, "ended_at": None,
           "trace_id": run_id * 4}
    steps = [{"run_id": run_id, "step": i + 1} for i in range(len(paths))]
    calls = [{"run_id": run_id, "step": i + 1, "call_index": 0, "tool": "read_file", "args": f'{{"path": "{p}"}}',
              "observation": "no such file", "observation_bytes": 12, "is_error": False} for i, p in enumerate(paths)]
    rows: dict[str, Any] = {"run_records": [run], "step_records": steps, "tool_call_records": calls}
    sink.write(preview_rows(run_id * 4, rows, 10))


def test_a_running_run_in_a_streak_shows_it_and_one_that_got_out_does_not(db: Path) -> None:
    sink = Sink(db)
    _preview(sink, "aaaaaaaa", ["a.txt", "notes.txt", "notes.txt", "notes.txt", "notes.txt", "notes.txt"])
    _preview(sink, "bbbbbbbb", ["notes.txt"] * 5 + ["other.txt"])  # out of it: nothing to say now
    page = list_runs(Store(db))
    live = {r.run_id: (r.status, r.live) for r in page.rows}
    assert live == {"aaaaaaaa": ("running", "same call 5x since step 2"), "bbbbbbbb": ("running", None)}
    [row] = [r for r in page.rows if r.run_id == "aaaaaaaa"]
    assert [c.plain for c in run_cells(row)][4:6] == ["running", "same call 5x since step 2"]
