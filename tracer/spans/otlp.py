"""The tracer's OTLP path: best effort, bounded, and honest about what it lost.

An OTLP backend gets a second copy of the trace, so it must never slow or break the agent: spans go
through the SDK's batch processor (a bounded queue, exported on its own thread) to the SDK's OTLP/HTTP
exporter with a short timeout, and a flush or shutdown waits at most ``WAIT_SECONDS`` for it.
What does not arrive is counted per run (by the span's ``looptrace.run.id``): spans *dropped* (the
queue was full, or still queued at shutdown) and spans *failed* (the exporter reported a failure or had
not answered by shutdown). The counts go to the store's ``export_drops`` table and one warning.

The processor drops a span itself when the queue is full, rather than letting the SDK do it, so a dead
endpoint does not log one "Queue full" warning per span; the SDK's queue length is known without
reaching into it: spans enqueued minus spans the exporter has been handed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, Status
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ..records import conventions as c
from .forking import around_fork_threads, at_fork, signals_to_main_thread
from ..records.spans import attributes_of, events_of
from ..sink.redact import Hits, Redactor, summarize
from ..records.text import to_json

if TYPE_CHECKING:
    from .exporter import DuckDBSpanExporter

__all__ = ["CountingSpanExporter", "OtlpSpanProcessor", "otlp_processor", "traces_url", "OTLP_TIMEOUT",
           "WAIT_SECONDS"]

log = logging.getLogger("looptrace.otlp")

OTLP_TIMEOUT = 5.0  # seconds per export request, retries included (the SDK's default is 10)
WAIT_SECONDS = 0.5  # the longest an agent's flush or exit waits for the OTLP queue to drain


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for a collector's base URL (``http://collector:4318``) or the URL itself."""
    return endpoint if endpoint.rstrip("/").endswith("/v1/traces") else endpoint.rstrip("/") + "/v1/traces"


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _run_id(span: ReadableSpan) -> str | None:
    value = (span.attributes or {}).get(c.RUN_ID)
    return None if value is None else str(value)


class CountingSpanExporter(SpanExporter):
    """Wraps an exporter, counting per run the spans it was handed and the spans it delivered.

    With ``stop_after_failure`` a failed export makes every later one fail at once, without a
    request: for a one-shot send, where waiting out the timeout batch after batch helps nobody.
    """

    def __init__(self, inner: SpanExporter, *, stop_after_failure: bool = False) -> None:
        self.inner = inner
        self.stop_after_failure = stop_after_failure
        self._lock = threading.Lock()
        self.seen: Counter[str | None] = Counter()
        self.delivered: Counter[str | None] = Counter()
        self.seen_total = 0
        self.failures = 0
        self.last_error: str | None = None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        runs = Counter(_run_id(s) for s in spans)
        with self._lock:
            self.seen.update(runs)
            self.seen_total += len(spans)
            if self.stop_after_failure and self.failures:
                self.failures += 1
                return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # noqa: BLE001 - telemetry never raises into the agent
            result, self.last_error = SpanExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.delivered.update(runs)
            else:
                self.failures += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)

    def counts(self) -> tuple[dict[str | None, int], dict[str | None, int]]:
        """Spans handed to this exporter and spans it delivered, by run."""
        with self._lock:
            return dict(self.seen), dict(self.delivered)

    def reset(self) -> None:
        with self._lock:
            self.seen.clear()
            self.delivered.clear()
            self.seen_total = self.failures = 0


class OtlpSpanProcessor(BatchSpanProcessor):
    """The SDK's batch processor, counting per run what it drops and what its exporter fails to send."""

    def __init__(
        self,
        exporter: CountingSpanExporter,
        *,
        name: str,
        store: DuckDBSpanExporter | None = None,
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
        schedule_delay_millis: float | None = None,
        wait_seconds: float = WAIT_SECONDS,
    ) -> None:
        queue = max_queue_size or self._default_max_queue_size()
        # Its worker thread leaves SIGTERM and SIGINT to the main thread, as the store's does.
        around_fork_threads(lambda: super(OtlpSpanProcessor, self).__init__(
            exporter, max_queue_size=queue, max_export_batch_size=max_export_batch_size,
            schedule_delay_millis=schedule_delay_millis))
        self.name = name
        self._counter = exporter
        self._store = store
        self._queue_size = queue
        self._wait_seconds = wait_seconds
        self._flushing: threading.Event | None = None
        self._lock = threading.Lock()
        self._handed: Counter[str | None] = Counter()
        self._enqueued = 0
        self._closed = False
        self.losses: list[dict[str, Any]] = []  # filled at shutdown: one row per run that lost spans
        # The SDK empties the queue in a forked child; the parent accounts for those spans.
        at_fork(self._after_fork)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._handed.clear()
        self._enqueued = 0
        self._flushing = None
        self._counter.reset()

    def on_end(self, span: ReadableSpan) -> None:
        if not span.context or not span.context.trace_flags.sampled:
            return
        with self._lock:
            self._handed[_run_id(span)] += 1
            room = self._enqueued - self._counter.seen_total < self._queue_size
            if room:
                self._enqueued += 1
        if room:
            super().on_end(span)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        """Send what is queued, waiting at most ``wait_seconds``; False if it is not done by then.

        The SDK's flush exports on the calling thread, which would block the agent for the exporter's
        whole timeout on a dead endpoint; here it runs on a helper thread, one at a time.
        """
        with self._lock:
            done = self._flushing
            if done is None:
                done = self._flushing = threading.Event()
                with signals_to_main_thread():
                    threading.Thread(target=self._flush, args=(done,), name="looptrace-otlp-flush",
                                     daemon=True).start()
        return done.wait(self._wait_seconds)

    def _flush(self, done: threading.Event) -> None:
        try:
            super().force_flush()
        finally:
            with self._lock:
                self._flushing = None
            done.set()

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Bounded: what is still queued or in flight after this is counted as lost, not waited for.
        self._batch_processor.shutdown(timeout_millis=int(self._wait_seconds * 1000))
        self.losses = self.loss_rows()
        if not self.losses:
            return
        dropped = sum(r["dropped"] for r in self.losses)
        failed = sum(r["failed"] for r in self.losses)
        if self._store is not None:
            self._store.write_rows({"export_drops": self.losses})
        log.warning("looptrace: %d spans did not reach %s (dropped: %d, failed: %d)%s; counted per run in "
                    "export_drops", dropped + failed, self.name, dropped, failed,
                    f"; last error: {self._counter.last_error}" if self._counter.last_error else "")

    def loss_rows(self) -> list[dict[str, Any]]:
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        with self._lock:
            handed = dict(self._handed)
            seen, delivered = self._counter.counts()
        rows = []
        for run_id, n in sorted(handed.items(), key=lambda kv: kv[0] or ""):
            dropped, failed = n - seen.get(run_id, 0), seen.get(run_id, 0) - delivered.get(run_id, 0)
            if dropped or failed:
                rows.append({"run_id": run_id, "exporter": self.name, "dropped": dropped, "failed": failed,
                             "recorded_at": now})
        return rows


class RedactingSpanExporter(SpanExporter):
    """Redacts spans before they leave the process, as the store's exporter does before writing.
    If redaction itself fails, nothing is sent (fail closed)."""

    def __init__(self, inner: SpanExporter, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor = redactor

    def _redact(self, span: ReadableSpan) -> ReadableSpan:
        # Everything a span carries that may hold text: name, attributes, event names and
        # attributes, status message, links' attributes and the resource's attributes.
        hits: Hits = {}
        r = self.redactor
        attributes = r.attributes(dict(span.attributes or {}), hits)
        events = [Event(r.text(e.name, hits), r.attributes(dict(e.attributes or {}), hits), e.timestamp)
                  for e in span.events]
        status = span.status
        if status.description:
            status = Status(status.status_code, r.text(status.description, hits))
        links = [Link(link.context, r.attributes(dict(link.attributes or {}), hits)) for link in span.links]
        resource = span.resource
        if resource is not None and resource.attributes:
            resource = Resource(r.attributes(dict(resource.attributes), hits), resource.schema_url)
        if hits:
            attributes["looptrace.redactions"] = to_json(summarize(hits))
        return ReadableSpan(
            name=r.text(span.name, hits), context=span.context, parent=span.parent, resource=resource,
            attributes=attributes, events=events, links=links, kind=span.kind, status=status,
            start_time=span.start_time, end_time=span.end_time, instrumentation_scope=span.instrumentation_scope,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            maps = [attributes_of(s) for s in spans] + [e.attributes or {} for s in spans for e in events_of(s)]
            maps += [link.attributes or {} for s in spans for link in s.links]
            maps += list({id(s.resource): s.resource.attributes for s in spans if s.resource is not None}.values())
            texts = [s.status.description for s in spans] + [s.name for s in spans] + \
                [e.name for s in spans for e in events_of(s)]
            # One cheap test clears most batches whole (see Redactor.may_redact).
            redacted = [self._redact(s) for s in spans] if self.redactor.may_redact(maps, texts) else spans
        except Exception:  # noqa: BLE001 - never send what could not be redacted
            log.warning("looptrace: could not redact %d spans; they were not sent", len(spans), exc_info=True)
            return SpanExportResult.FAILURE
        return self.inner.export(redacted)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def otlp_processor(
    endpoint: str, *, store: DuckDBSpanExporter | None = None, redactor: Redactor | None = None
) -> OtlpSpanProcessor:
    """The OTLP/HTTP exporter behind a counting batch processor; losses are recorded into ``store``."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    url = traces_url(endpoint)
    # A timeout the user configured in the environment wins (the exporter reads it when given None).
    configured = any(os.environ.get(f"OTEL_EXPORTER_OTLP{k}_TIMEOUT") for k in ("_TRACES", ""))
    timeout = None if configured else OTLP_TIMEOUT
    exporter = CountingSpanExporter(
        RedactingSpanExporter(OTLPSpanExporter(endpoint=url, timeout=timeout), redactor or Redactor()))
    return OtlpSpanProcessor(exporter, name=f"otlp {_without_userinfo(url)}", store=store)
