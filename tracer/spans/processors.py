"""Span processors: losing no step under bursts, and recording a run the moment it starts.

The SDK's BatchSpanProcessor drops spans when its queue is full (a burst of 20,000 spans into a
DuckDB file lost 72% with the defaults). A scripted agent loop ends thousands of spans a second, so
for the store we apply back-pressure instead: ``on_end`` waits, bounded, while the exporter is
more than a queue's worth behind. A wait that times out lets the span through to the SDK, which may
then drop it; the difference between spans handed over and spans received is counted as dropped.
"""

from __future__ import annotations

import threading
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ..records import conventions as c
from .exporter import DuckDBSpanExporter
from .forking import around_fork_threads, at_fork, signals_to_main_thread
from ..records.spans import run_start_row

__all__ = ["BackpressureSpanProcessor", "RunStartProcessor", "EXPORT_BATCH"]


# An export batch is one segment: a few files, each fsynced, that every live reader scans until
# they are absorbed, and whose deletion is slow on some disks. Bigger batches mean fewer of them; a
# slow agent's batches stay small anyway (the processor flushes every 0.5 s).
EXPORT_BATCH = 8192
QUEUE = 4 * EXPORT_BATCH
# How often the worker hands queued spans to the exporter, which prepares them (maps and redacts)
# at once and writes them as one segment every ``schedule_delay_millis``: so a final flush finds
# them prepared and only writes (``pending.py``).
PREPARE_MILLIS = 100


def _in_child_process() -> bool:
    """A ``multiprocessing`` child of any start method, once it runs. Asked when a run ends, not when
    ``Tracing`` is made: a spawn or forkserver child imports the user's main module (where ``Tracing``
    is often made) before multiprocessing records its parent, and such a pool worker, ended by
    SIGTERM, lost its runs (issue 24: ``Pool`` under spawn with a parent that traced first)."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


class BackpressureSpanProcessor(BatchSpanProcessor):
    def __init__(
        self,
        exporter: DuckDBSpanExporter,
        *,
        max_queue_size: int = QUEUE,
        max_export_batch_size: int = EXPORT_BATCH,
        schedule_delay_millis: float = 500,
        max_wait_seconds: float = 10.0,
    ) -> None:
        # The SDK's worker thread (started here, and again in each forked child) leaves SIGTERM and
        # SIGINT to the main thread: see ``forking.signals_to_main_thread``.
        exporter.write_delay = schedule_delay_millis / 1000
        exporter.write_spans = max_export_batch_size
        exporter.hold_starts = True  # this processor's worker writes held rows every write_delay
        around_fork_threads(lambda: super(BackpressureSpanProcessor, self).__init__(
            exporter,
            max_queue_size=max_queue_size,
            max_export_batch_size=max_export_batch_size,
            schedule_delay_millis=min(schedule_delay_millis, PREPARE_MILLIS),
        ))
        # Each time the SDK's worker wakes (every PREPARE_MILLIS) and after a flush's export, the
        # exporter writes its prepared rows if they are due: a quiet agent's last steps still reach
        # the store within ``schedule_delay_millis`` or so, as before.
        batch = self._batch_processor
        export = batch._export

        def export_then_write_due(strategy: Any) -> None:
            export(strategy)
            exporter.write_due()

        batch._export = export_then_write_due  # type: ignore[method-assign]
        self._exporter = exporter
        self._high_water = max_queue_size - max_export_batch_size
        self._max_wait = max_wait_seconds
        self._handed = 0
        self._export_each_run = False
        at_fork(self._after_fork)

    def _after_fork(self) -> None:
        self._handed = 0  # the exporter's counters restart at zero in the child too
        self.export_each_run()

    def export_each_run(self) -> None:
        """Export each run the moment it ends. For child processes: a forked child may leave by
        ``os._exit`` (multiprocessing's workers do, os.fork users may) and a pool's workers are ended
        by SIGTERM, both skipping every exit hook, so the spans still queued would be lost. A run is
        coarse: one segment per run, not per span. A run's start record is written at once too, not
        held for the next segment: a child ended by SIGTERM keeps the start of the run it was in."""
        self._export_each_run = True
        self._exporter.hold_starts = False

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context or not span.context.trace_flags.sampled:
            return
        progress = self._exporter.progress
        with progress:  # the exporter's own lock for its count: one lock per span, not two
            if self._handed - self._exporter.spans_received >= self._high_water:
                progress.wait_for(
                    lambda: self._handed - self._exporter.spans_received < self._high_water, self._max_wait
                )
            self._handed += 1
        super().on_end(span)
        if span.name.startswith(c.OP_INVOKE_AGENT) and (self._export_each_run or _in_child_process()):
            self.force_flush()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export what is queued, then write every prepared row: durable when this returns True."""
        exported = super().force_flush(timeout_millis)
        return self._exporter.write_pending() and exported

    def shutdown(self) -> None:
        self._batch_processor.shutdown()
        self._exporter.spans_dropped = max(0, self._handed - self._exporter.spans_received)
        # The exporter was shut down by the SDK before it knew of the drops: report them now.
        if self._exporter.spans_dropped:
            self._exporter.write_rows({"writer_stats": [self._exporter.stats_row()]})


class RunStartProcessor(SpanProcessor):
    """Stores a run's start record soon after its invoke_agent span starts, so a run whose process
    is killed still shows up (as ``incomplete``) with its agent, task and model.

    The record is prepared (redacted) on this processor's own thread, never on the agent's:
    ``on_start`` only queues the row. Beside the batch processor it is then held with the spans'
    rows and written in their next segment, within ``schedule_delay_millis`` (0.5 s) of the start,
    as the run's first steps are (``DuckDBSpanExporter.hold_rows``); a process that stores each run
    as it ends (a forked or multiprocessing child) writes it at once, as its own fsynced segment.
    """

    def __init__(self, exporter: DuckDBSpanExporter) -> None:
        self._exporter = exporter
        self._queue: list[dict[str, Any]] = []
        self._in_flight = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        at_fork(self._after_fork)

    def _after_fork(self) -> None:
        # The parent's thread does not exist in the child; its queued rows are the parent's to write.
        self._queue, self._in_flight, self._thread = [], 0, None
        self._cond = threading.Condition()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not span.name.startswith(c.OP_INVOKE_AGENT):  # every span starts here: the cheap test first
            return
        attrs = span.attributes or {}
        if attrs.get(c.GEN_AI_OPERATION) != c.OP_INVOKE_AGENT or attrs.get(c.RUN_ID) is None:
            return
        ctx = span.get_span_context()
        row = run_start_row(
            attrs, trace_id=f"{ctx.trace_id:032x}", span_id=f"{ctx.span_id:016x}", start_ns=span.start_time
        )
        with self._cond:
            if self._stopped:
                self._exporter.write_rows({"run_records": [row]})  # after shutdown: no thread left to do it
                return
            self._queue.append(row)
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="looptrace-run-starts", daemon=True)
                with signals_to_main_thread():
                    self._thread.start()
            self._cond.notify()

    def _work(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._stopped)
                rows, self._queue = self._queue, []
                self._in_flight = len(rows)
                if not rows:
                    return
            rows_of = {"run_records": rows}
            if _in_child_process():  # a pool worker ended by SIGTERM keeps the run it was in
                self._exporter.write_rows(rows_of)  # never raises; failures are counted
            else:
                self._exporter.hold_rows(rows_of)  # never raises; failures are counted
            with self._cond:
                self._in_flight = 0
                self._cond.notify_all()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue and not self._in_flight, timeout_millis / 1000)

    def shutdown(self) -> None:
        self.force_flush()
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)
