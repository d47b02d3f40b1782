"""A burst of spans: does every one reach the store?

10,000 steps of two spans each are ended as fast as Python can make them (plus the run's own span).
looptrace's ``Tracing`` puts back-pressure on the agent when the exporter falls behind; the SDK's
stock ``BatchSpanProcessor`` with default settings (a 2048-span queue, 512-span batches every 5 s)
drops what does not fit. Both feed the same ``DuckDBSpanExporter``, and spans are counted in the
store afterwards, so the figure is what a user would find, not what a processor believes it sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from looptrace.tracer.spans.exporter import DuckDBSpanExporter
from looptrace.tracer.spans.manual import Run
from looptrace.tracer.store import Store
from looptrace.tracer.spans.tracing import Tracing

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "burst: spans stored / spans emitted"
ROUNDS = 3


def _emit(run: Run, steps: int) -> None:
    with run:
        for _ in range(steps):
            with run.step("thought") as step:
                with step.tool_call("ls", {"path": "."}) as call:
                    call.result("a b c")


def _stored(db: Path) -> int:
    with Store(db).reader() as conn:
        row = conn.execute("SELECT count(*) FROM spans").fetchone()
    return int(row[0]) if row else 0


@contextmanager
def _quiet(*names: str) -> Iterator[None]:
    """Drops are the measurement here; the SDK's and exporter's warnings about them would only
    interleave with the table."""
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _looptrace(steps: int) -> tuple[float, float]:
    """Fraction of spans stored, and seconds from the first span to the end of shutdown."""
    with scratch_dir("burst") as tmp:
        db = tmp / "looptrace.duckdb"
        t0 = time.perf_counter()
        tracing = Tracing(db)
        _emit(tracing.run("bench"), steps)
        tracing.shutdown()
        elapsed = time.perf_counter() - t0
        return _stored(db) / (2 * steps + 1), elapsed


def _baseline(steps: int) -> tuple[float, float]:
    with scratch_dir("burst") as tmp:
        db = tmp / "sdk.duckdb"
        t0 = time.perf_counter()
        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(DuckDBSpanExporter(db)))
        with _quiet("opentelemetry", "looptrace"):
            _emit(Run(provider.get_tracer("looptrace"), "bench"), steps)
            provider.shutdown()
        elapsed = time.perf_counter() - t0
        return _stored(db) / (2 * steps + 1), elapsed


def run(quick: bool = False) -> list[Result]:
    steps = 2_000 if quick else 10_000
    ours, theirs = alternate(ROUNDS, lambda: _looptrace(steps), lambda: _baseline(steps))
    stored_ours = min(f for f, _ in ours) * 100  # the worst round: one lost span is a miss
    stored_theirs = median([f for f, _ in theirs]) * 100
    note = (
        f"{2 * steps + 1:,} spans ({steps:,} steps x 2 + the run span) x {ROUNDS} rounds; "
        "looptrace: worst round, "
        f"baseline: median (rounds {', '.join(f'{f * 100:.1f}%' for f, _ in theirs)}); "
        f"wall time incl. shutdown: looptrace {median([t for _, t in ours]):.2f} s, "
        f"baseline {median([t for _, t in theirs]):.2f} s"
    )
    return [Result("stored", "%", stored_ours, stored_theirs, "looptrace 100%", stored_ours >= 100.0, note)]
