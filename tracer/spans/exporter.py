"""The DuckDB span exporter: the SDK's SpanExporter contract, handing records to the sink.

``export`` never raises and never blocks on another process: it maps a batch of spans to records
(``records/spans.py``) and gives them to the sink, which redacts them and writes one segment. Failures (a full disk, a read-only folder) are logged
once, counted, and reported in ``writer_stats`` and at shutdown, so telemetry never breaks the agent
and no loss is silent.
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

__all__ = ["DuckDBSpanExporter"]

log = logging.getLogger("looptrace.exporter")


class DuckDBSpanExporter(SpanExporter):
    def __init__(
        self, store_path: str | os.PathLike[str], *, durable: bool = True, redactor: Redactor | None = None
    ) -> None:
        self.store_path = os.fspath(store_path)
        self.sink = Sink(store_path, redactor=redactor, durable=durable)
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
        self.progress = threading.Condition()
        self.spans_received = self.spans_written = self.write_errors = self.spans_dropped = 0
        self.last_error, self._warned = None, False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        n = len(spans)
        try:
            if self._shutdown:
                self._failed(n, "export after shutdown")
                return SpanExportResult.FAILURE
            self.sink.write(columns_for_batch(SpanBatch.of_readable(spans)))
            with self._lock:
                self.spans_written += n
            return SpanExportResult.SUCCESS
        except Exception as exc:  # noqa: BLE001 - telemetry must never raise into the agent
            self._failed(n, f"{type(exc).__name__}: {exc}")
            return SpanExportResult.FAILURE
        finally:
            with self.progress:
                self.spans_received += n
                self.progress.notify_all()

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
        return True  # export() writes synchronously: nothing is buffered here

