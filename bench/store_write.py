"""Steps per second written durably: looptrace's exporter + compaction vs. a bulk Arrow insert.

Both sides write the same rows (those ``tracer.records.columns_for_batch`` makes for N steps) and end
with them in a DuckDB file on disk. looptrace goes the way a live process does: batches of ``EXPORT_BATCH``
spans through ``DuckDBSpanExporter.export`` (spans to rows, rows to Arrow, one fsynced Parquet
segment per batch), then ``Store.compact()`` absorbs the segments into the file. The baseline is
the plainest fast route: one Arrow table per base table, ``INSERT ... SELECT`` into DuckDB,
``CHECKPOINT``. Spans are made before the clock starts; so are both files' schemas, and the
baseline's Arrow tables (built from the same columns, so its timed part is the fastest raw DuckDB
path: one ``INSERT ... SELECT`` per table and the checkpoint). Turning spans into rows is part of ``export``, so it is charged to looptrace alone;
the note prints what that conversion costs by itself. After each looptrace round the background
deletion of its absorbed segments is let finish, untimed, so that its disk work does not slow the
baseline's round.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from looptrace.tracer.spans.exporter import DuckDBSpanExporter
from looptrace.tracer.spans.manual import Run
from looptrace.tracer.spans.processors import EXPORT_BATCH
from looptrace.tracer.records.spans import SpanBatch, columns_for_batch
from looptrace.tracer.store import Store
from looptrace.tracer.store.segments import TRASH, arrow_schema, segments_dir, to_arrow
from looptrace.tracer.store.migrations import migrate

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "store_write: steps/s written durably into the store"
GOAL_RATIO = 0.5
ROUNDS = 5
BATCH = EXPORT_BATCH  # what a live process's batch processor hands the exporter


def make_spans(steps: int) -> tuple[ReadableSpan, ...]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with Run(provider.get_tracer("looptrace"), "bench") as run:
        for _ in range(steps):
            with run.step("thought") as step:
                with step.tool_call("ls", {"path": "."}) as call:
                    call.result("a b c")
    provider.shutdown()
    return exporter.get_finished_spans()


def _count_spans(db: Path) -> int:
    with duckdb.connect(str(db), read_only=True) as conn:
        row = conn.execute("SELECT count(*) FROM spans").fetchone()
    return int(row[0]) if row else 0


def _looptrace(spans: tuple[ReadableSpan, ...], tmp: Path, tag: int) -> float:
    db = tmp / f"looptrace-{tag}.duckdb"
    Store(db).compact()  # creates and migrates the file, as the baseline's tables are made untimed
    t0 = time.perf_counter()
    exporter = DuckDBSpanExporter(db)
    for i in range(0, len(spans), BATCH):
        if exporter.export(spans[i : i + BATCH]) is not SpanExportResult.SUCCESS:
            raise RuntimeError(f"export failed: {exporter.last_error}")
    Store(db).compact()
    elapsed = time.perf_counter() - t0
    if (n := _count_spans(db)) != len(spans):
        raise RuntimeError(f"looptrace stored {n} of {len(spans)} spans")
    _wait_for_trash(db)
    return elapsed


def _wait_for_trash(db: Path) -> None:
    """Let the background deletion of absorbed segments finish (untimed), so that its disk work
    does not land in the baseline's round."""
    trash = segments_dir(db) / TRASH
    deadline = time.monotonic() + 30
    while trash.exists() and any(trash.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.01)


def _baseline(tables: dict[str, pa.Table], n_spans: int, tmp: Path, tag: int) -> float:
    db = tmp / f"baseline-{tag}.duckdb"
    with duckdb.connect(str(db)) as conn:
        # The store's own migrations (TABLES' DDL plus later ALTERs), so both files hold the same
        # columns and the rows fit ``arrow_schema`` exactly.
        migrate(conn)
    t0 = time.perf_counter()
    conn = duckdb.connect(str(db))
    try:
        for table, arrow_rows in tables.items():
            conn.register("arrow_rows", arrow_rows)
            conn.execute(f"INSERT INTO {table} SELECT * FROM arrow_rows")
            conn.unregister("arrow_rows")
        conn.execute("CHECKPOINT")
    finally:
        conn.close()
    elapsed = time.perf_counter() - t0
    if (n := _count_spans(db)) != n_spans:
        raise RuntimeError(f"baseline stored {n} of {n_spans} spans")
    return elapsed


def _arrow_tables(batches: list[Any]) -> dict[str, pa.Table]:
    """One Arrow table per base table, from the exporter's columns (untimed: the baseline's input)."""
    parts: dict[str, list[pa.Table]] = {}
    for batch in batches:
        for table, data in batch.items():
            parts.setdefault(table, []).append(to_arrow(data, arrow_schema(table)))
    return {table: pa.concat_tables(p) for table, p in parts.items()}


def run(quick: bool = False) -> list[Result]:
    steps = 5_000 if quick else 50_000
    spans = make_spans(steps)
    t0 = time.perf_counter()
    columns = [columns_for_batch(SpanBatch.of_readable(spans[i : i + BATCH])) for i in range(0, len(spans), BATCH)]
    convert = time.perf_counter() - t0  # inside looptrace's export; done untimed for the baseline
    tables = _arrow_tables(columns)
    counter = iter(range(1_000_000))
    with scratch_dir("store-write") as tmp:
        warm = make_spans(100)  # warm-up: cached Arrow schemas, DuckDB's JSON extension
        _looptrace(warm, tmp, -1)
        _baseline(_arrow_tables([columns_for_batch(SpanBatch.of_readable(warm))]), len(warm), tmp, -1)
        ours, theirs = alternate(
            ROUNDS,
            lambda: _looptrace(spans, tmp, next(counter)),
            lambda: _baseline(tables, len(spans), tmp, next(counter)),
        )
    ours_rate, theirs_rate = steps / median(ours), steps / median(theirs)
    ratio = ours_rate / theirs_rate
    note = (
        f"{steps:,} steps ({len(spans):,} spans) x {ROUNDS} rounds, medians: "
        f"looptrace {median(ours):.2f} s, baseline {median(theirs):.2f} s; spans -> rows alone "
        f"(SpanBatch + columns_for_batch, once, untimed) {convert:.2f} s"
    )
    return [
        Result(
            "write", "steps/s", ours_rate, theirs_rate, f"ratio >= {GOAL_RATIO:g}", ratio >= GOAL_RATIO, note
        )
    ]
