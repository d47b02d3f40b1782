"""Spans are prepared (mapped, redacted) as the batch processor hands them over, several times a
second, and written as one segment when due or at a flush (``spans/pending.py``).

Real ``Tracing`` into a real store: a flush makes every prepared row durable, and a quiet agent's
last steps still reach the store without one.
"""

from __future__ import annotations

import time
from pathlib import Path

from looptrace.tracer import Tracing
from looptrace.tracer.spans.pending import merge_tables
from looptrace.tracer.store.segments import list_segments, segment_files, segments_dir

from .conftest import query


def _steps(tracing: Tracing, n: int, secret: str = "") -> None:
    with tracing.run("prepared", task="prepare as they come") as run:
        for i in range(n):
            with run.step(f"thinking {i}") as step, step.tool_call("read", {"path": f"f{i}"}) as call:
                call.result(f"body {i} {secret}")


def _with_spans(db: Path) -> list[str]:
    """The segments that hold span rows."""
    return segment_files(segments_dir(db), list_segments(segments_dir(db)), "spans")


def _wait(condition, seconds: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_rows_prepared_before_a_flush_are_written_by_it_as_one_segment_redacted(db: Path) -> None:
    secret = "sk-ant-api03-" + "Q" * 40
    tracing = Tracing(db, schedule_delay_millis=60_000, handle_sigterm=False)  # never due by time
    exporter = tracing.exporter
    assert exporter is not None
    _steps(tracing, 30, secret)
    # The worker hands the spans over within a fraction of a second; they are prepared, not written.
    assert _wait(lambda: exporter.spans_received == 61)
    assert exporter.spans_written == 0
    assert not _with_spans(db)  # (the run's start record was written as it started, without its spans)
    # Held as the segment's Arrow tables already: the flush converts nothing, it writes.
    import pyarrow as pa

    held = [table for part in exporter._pending._parts for table in part.values()]  # noqa: SLF001
    assert held and all(isinstance(table, pa.Table) for table in held)
    assert tracing.flush()
    assert exporter.spans_written == 61
    assert len(_with_spans(db)) == 1
    assert query(db, "SELECT count(*) FROM steps") == [(30,)]
    assert query(db, "SELECT count(*) FROM tool_calls WHERE observation LIKE '%[REDACTED:%'") == [(30,)]
    tracing.shutdown()
    for path in db.parent.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_quiet_agents_last_steps_reach_the_store_without_a_flush(db: Path) -> None:
    tracing = Tracing(db, schedule_delay_millis=200, handle_sigterm=False)
    _steps(tracing, 5)
    assert tracing.exporter is not None
    assert _wait(lambda: tracing.exporter.spans_written == 11)  # type: ignore[union-attr]
    assert query(db, "SELECT count(*) FROM steps") == [(5,)]
    tracing.shutdown()


def test_merged_tables_keep_every_row_and_column() -> None:
    a = {"spans": {"span_id": ["1", "2"], "name": ["x", "y"]}, "redaction_records": [{"rule": "r", "n": 1}]}
    b = {"spans": {"span_id": ["3"], "name": ["z"], "events": ["[]"]}, "step_records": {"step": [1]}}
    merged = merge_tables([a, b])
    assert merged["spans"] == {"span_id": ["1", "2", "3"], "name": ["x", "y", "z"], "events": [None, None, "[]"]}
    assert merged["redaction_records"] == [{"rule": "r", "n": 1}]
    assert merged["step_records"] == {"step": [1]}
    rows = merge_tables([{"t": [{"a": 1}]}, {"t": {"a": [2], "b": [3]}}])["t"]
    assert rows == [{"a": 1}, {"a": 2, "b": 3}]
