"""A run's start record is prepared off the agent's thread and stored with the next segment of spans
(not a segment of its own), within the write delay even while the agent sends nothing; a flush makes
it durable."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from looptrace.tracer.spans.tracing import Tracing
from looptrace.tracer.store import Store

from .conftest import query


def _spy(tracing: Tracing, name: str, calls: list[threading.Thread]) -> None:
    assert tracing.exporter is not None
    original = getattr(tracing.exporter, name)

    def spy(rows: Any) -> bool:
        calls.append(threading.current_thread())
        return original(rows)

    setattr(tracing.exporter, name, spy)


def test_the_start_record_is_prepared_by_another_thread_and_flushed(db: Path) -> None:
    tracing = Tracing(db, handle_sigterm=False)
    holders: list[threading.Thread] = []
    _spy(tracing, "hold_rows", holders)
    try:
        run = tracing.run("starter", task="look around")
        assert tracing.flush()
        assert query(db, "SELECT agent, task, status FROM runs") == [("starter", "look around", "incomplete")]
        assert holders and all(t is not threading.current_thread() for t in holders)
        run.finish("ok")
    finally:
        tracing.shutdown()
    assert query(db, "SELECT status FROM runs") == [("ok",)]


def test_a_run_start_shares_the_segment_of_the_next_spans(db: Path) -> None:
    tracing = Tracing(db, handle_sigterm=False)
    assert tracing.exporter is not None
    segments: list[Any] = []
    write = tracing.exporter.sink.write_prepared

    def counted(tables: Any) -> Any:
        segments.append(sorted(tables))
        return write(tables)

    tracing.exporter.sink.write_prepared = counted  # type: ignore[method-assign]
    try:
        with tracing.run("steady", task="t") as run:
            for _ in range(3):
                with run.step() as step:
                    step.tool_call("echo", {"x": 1}).result("ok")
            assert tracing.flush()
        # One segment: the start record rode with the steps' spans (it used to be one of its own).
        assert len(segments) == 1 and "run_records" in segments[0] and "step_records" in segments[0]
    finally:
        tracing.shutdown()
    assert query(db, "SELECT status, n_steps FROM runs") == [("ok", 3)]


def test_a_quiet_run_shows_as_incomplete_without_a_flush(db: Path) -> None:
    # An agent that starts a run and then waits (a long model call): no span ends, nothing flushes,
    # and the start record still reaches the store, as the processor writes held rows when due.
    tracing = Tracing(db, handle_sigterm=False, schedule_delay_millis=200)
    try:
        run = tracing.run("waiting", task="t")
        deadline, rows = time.monotonic() + 30, []
        while time.monotonic() < deadline and not rows:
            time.sleep(0.1)
            if db.exists() or Store(db).segments_dir.exists():
                rows = query(db, "SELECT agent, status FROM runs")
        assert rows == [("waiting", "incomplete")]
        run.finish("ok")
    finally:
        tracing.shutdown()
