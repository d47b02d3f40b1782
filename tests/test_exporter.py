"""The DuckDB exporter against the SDK's SpanExporter contract, and the no-drop guarantee."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from looptrace.tracer import DuckDBSpanExporter, Tracing

from .conftest import query


def finished_spans(n: int) -> list:  # type: ignore[type-arg]
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    for i in range(n):
        with tracer.start_as_current_span(f"work {i}", attributes={"i": i}):
            pass
    return list(memory.get_finished_spans())


def test_export_shutdown_and_force_flush_follow_the_contract(db: Path) -> None:
    exporter = DuckDBSpanExporter(db)
    spans = finished_spans(3)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert exporter.force_flush() is True
    exporter.shutdown()
    exporter.shutdown()  # idempotent
    assert exporter.export(spans) is SpanExportResult.FAILURE  # after shutdown: refused, not raised
    assert query(db, "SELECT name FROM spans ORDER BY name") == [("work 0",), ("work 1",), ("work 2",)]
    assert query(db, "SELECT spans_received, spans_written, write_errors FROM writer_stats") == [(3, 3, 0)]


def test_a_store_that_cannot_be_written_never_raises_and_warns_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "file").write_text("not a folder")
    exporter = DuckDBSpanExporter(tmp_path / "file" / "store.duckdb")
    with caplog.at_level(logging.WARNING, logger="looptrace.exporter"):
        assert exporter.export(finished_spans(2)) is SpanExportResult.FAILURE
        assert exporter.export(finished_spans(2)) is SpanExportResult.FAILURE
        exporter.shutdown()
    assert exporter.write_errors == 4
    warnings = [r.getMessage() for r in caplog.records]
    assert len([w for w in warnings if "could not write" in w]) == 1
    assert any("4 spans were not saved" in w for w in warnings)


def test_an_agent_keeps_running_when_the_store_is_unwritable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    with Tracing(tmp_path / "file" / "store.duckdb") as tracing, tracing.run("a") as run:
        for _ in range(10):
            with run.step("still going") as step, step.tool_call("t", {}) as call:
                call.result("fine")
    assert run.status == "ok"


@pytest.mark.slow
def test_a_burst_of_20000_spans_loses_none(db: Path) -> None:
    with Tracing(db) as tracing, tracing.run("burst") as run:
        for i in range(10_000):
            with run.step() as step, step.tool_call("t", {"i": i}) as call:
                call.result("x")
    assert query(db, "SELECT count(*) FROM spans") == [(20_001,)]
    assert query(db, "SELECT count(*) FROM steps") == [(10_000,)]
    assert query(db, "SELECT spans_dropped, write_errors FROM writer_stats") == [(0, 0)]
