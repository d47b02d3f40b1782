"""The DuckDB span exporter: the SDK's SpanExporter contract, handing records to the sink.

``export`` never raises and never blocks on another process: it maps a batch of spans to records
(``records/spans.py``) and has the sink redact them (``Sink.prepare``). With ``write_delay`` 0 (the
default) the rows are written at once, one segment per batch; the batch processor sets a delay, so
that the small batches it hands over several times a second are prepared as they come and written
together as one segment (``pending.py``), and ``write_pending`` (a flush, shutdown) writes what is
held. Failures (a full disk, a read-only folder) are logged once, counted, and reported in
``writer_stats`` and at shutdown, so telemetry never breaks the agent and no loss is silent.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..records.spans import SpanBatch, columns_for_batch
from ..sink import Redactor, Sink
from .forking import at_fork
from .pending import PendingRows

__all__ = ["DuckDBSpanExporter"]

log = logging.getLogger("looptrace.exporter")


class DuckDBSpanExporter(SpanExporter):
    def __init__(
        self, store_path: str | os.PathLike[str], *, durable: bool = True, redactor: Redactor | None = None,
        write_delay: float = 0.0, write_spans: int = 8192,
    ) -> None:
        self.store_path = os.fspath(store_path)
        self.sink = Sink(store_path, redactor=redactor, durable=durable)
        # Prepared rows are written once the oldest has waited ``write_delay`` seconds or they hold
        # ``write_spans`` spans (a segment's size), whichever comes first.
        self.write_delay = write_delay
        self.write_spans = write_spans
        # Whether rows that are not spans (a run's start record) may wait for the next segment of spans
        # instead of making one of their own (``hold_rows``): the batch processor sets it, since it
        # writes what is held every ``write_delay``; a process that must store each run at once (a
        # forked or multiprocessing child, ``export_each_run``) clears it.
        self.hold_starts = False
        self._pending = PendingRows()
        self._write_lock = threading.Lock()  # held while a segment of pending rows is written
        self._shutdown = False
        self._lock = threading.Lock()
        self.progress = threading.Condition()
        self.spans_received = 0
        self.spans_written = 0
        self.write_errors = 0
        self.spans_dropped = 0  # set by the processor at shutdown: spans it never handed over
        self.last_error: str | None = None
        self._warned = False
        at_fork(self._after_fork)

    def _after_fork(self) -> None:
        """A forked child counts its own spans; its parent's counts and locks are not its own."""
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._pending = PendingRows()  # the parent's rows are the parent's to write
        self.progress = threading.Condition()
        self.spans_received = self.spans_written = self.write_errors = self.spans_dropped = 0
        self.last_error, self._warned = None, False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        n = len(spans)
        try:
            if self._shutdown:
                self._failed(n, "export after shutdown")
                return SpanExportResult.FAILURE
            # Prepared to be held: converted here as the writer will write them, not under the lock a
            # flush waits for.
            prepared = self.sink.prepare(columns_for_batch(SpanBatch.of_readable(spans)), to_hold=True)
            with self._write_lock:
                self._pending.add(prepared, n)
                due = self._pending.spans >= self.write_spans or self._pending.age() >= self.write_delay
            if due and not self.write_pending():
                return SpanExportResult.FAILURE
            return SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            self._failed(n, f"{type(exc).__name__}: {exc}")
            return SpanExportResult.FAILURE
        finally:
            with self.progress:
                self.spans_received += n
                self.progress.notify_all()

    def write_pending(self) -> bool:
        """Write the prepared rows held, as one segment; True if there were none or they are now
        durable. Never raises: a failure counts their spans as write errors. A write under way in
        another thread is waited for, so rows prepared before this call are durable when it returns."""
        with self._write_lock:
            if not self._pending:
                return True
            tables, n = self._pending.take()
            try:
                self.sink.write_prepared(tables)
            except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
                self._failed(n, f"{type(exc).__name__}: {exc}")
                return False
        with self._lock:
            self.spans_written += n
        return True

    def write_due(self) -> None:
        """Write the prepared rows if the oldest has waited ``write_delay`` (the batch processor's
        worker calls this each time it wakes, so rows reach the store when the agent goes quiet)."""
        with self._write_lock:
            due = bool(self._pending) and self._pending.age() >= self.write_delay
        if due:
            self.write_pending()

    def hold_rows(self, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> bool:
        """Rows that are not spans (a run's start record) prepared and held with the spans' rows, to be
        written in the next segment (within ``write_delay``, as a quiet agent's spans are), when
        ``hold_starts``; else written at once as their own segment. Never raises.

        A segment per run start cost a Parquet write and two fsyncs each (2.4-3.0 ms CPU; in the
        instrumentor bench, a run every 25 calls, 0.09-0.12 ms per call, ~10% of the instrumentor's
        cost); held, a run start costs its preparation only. A run's start is durable within
        ``write_delay`` (0.5 s) of its start instead of a few milliseconds."""
        if not self.hold_starts or self.write_delay <= 0 or self._shutdown:
            return self.write_rows(rows)
        try:
            prepared = self.sink.prepare(rows, to_hold=True)
            with self._write_lock:
                self._pending.add(prepared, 0)
            return True
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            self._failed(0, f"{type(exc).__name__}: {exc}")
            return False

    def write_rows(self, rows: Mapping[str, Sequence[Mapping[str, Any]]]) -> bool:
        """Write rows that are not spans (a run's start record, stats) right away. Never raises."""
        try:
            self.sink.write(rows)
            return True
        except Exception as exc:  # noqa: BLE001
            self._failed(0, f"{type(exc).__name__}: {exc}")
            return False

    def _failed(self, n: int, message: str) -> None:
        with self._lock:
            self.write_errors += n
            self.last_error = message
            first = not self._warned
            self._warned = True
        if first:
            log.warning("looptrace: could not write trace data to %s: %s", self.store_path, message)

    def stats_row(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "recorded_at": datetime.now(timezone.utc).replace(tzinfo=None),
            "spans_received": self.spans_received,
            "spans_written": self.spans_written,
            "spans_dropped": self.spans_dropped,
            "write_errors": self.write_errors,
            "last_error": self.last_error,
        }

    def shutdown(self) -> None:
        if self._shutdown:
            return
        self.write_pending()
        self._shutdown = True
        lost = self.write_errors + self.spans_dropped
        if lost or self.spans_received:
            self.write_rows({"writer_stats": [self.stats_row()]})
        if lost:
            log.warning(
                "looptrace: %d spans were not saved to %s (write errors: %d, dropped: %d; last error: %s)",
                lost, self.store_path, self.write_errors, self.spans_dropped, self.last_error,
            )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.write_pending()

