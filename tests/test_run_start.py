"""A run's start record is written off the agent's thread, and a flush makes it durable."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from looptrace.tracer.spans.tracing import Tracing

from .conftest import query


def test_the_start_record_is_written_by_another_thread_and_flushed(db: Path) -> None:
    tracing = Tracing(db, handle_sigterm=False)
    assert tracing.exporter is not None
    writers: list[threading.Thread] = []
    original = tracing.exporter.write_rows

    def write_rows(rows: Any) -> bool:
        writers.append(threading.current_thread())
        return original(rows)

    tracing.exporter.write_rows = write_rows  # type: ignore[method-assign]
    try:
        run = tracing.run("starter", task="look around")
        assert tracing.flush()
        assert query(db, "SELECT agent, task, status FROM runs") == [("starter", "look around", "incomplete")]
        assert writers and all(t is not threading.current_thread() for t in writers)
        run.finish("ok")
    finally:
        tracing.shutdown()
    assert query(db, "SELECT status FROM runs") == [("ok",)]

