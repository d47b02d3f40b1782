"""Diagnoses as ``gen_ai.evaluation.result`` *log records*, the shape the GenAI conventions now define.

OpenTelemetry is moving events off spans onto log records tied to their span: the conventions define
``gen_ai.evaluation.result`` as an event, i.e. a log record. ``looptrace analyze --otlp-endpoint`` sends
one per diagnosis, with the attributes of ``evaluation.evaluation_attributes`` and the run's id, in the
context of the run's own span when the store knows it (so a backend shows the verdict in the run's
trace), through the SDK's OTLP/HTTP log exporter and batch processor, flushed before returning.
``--evaluation-span-events`` sends the older shape instead (``evaluation.py``: one span per run, one span
event per diagnosis) for backends that do not take logs. As there, a dead endpoint costs one warning.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from looptrace.tracer.export.source import ParquetSource
from looptrace.tracer.cli.plural import count
from looptrace.tracer.records import conventions as c
from looptrace.tracer.spans.otlp import OTLP_TIMEOUT
from looptrace.tracer.store import Store

from .evaluation import EVENT, EvaluationReport, _folded_otlp_logs, evaluation_attributes, run_parents, send_evaluations

if TYPE_CHECKING:
    from opentelemetry._logs import Logger
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult

    from .analyzer import RunDiagnoses

__all__ = ["send_evaluation_logs", "send_and_report", "emit_evaluation_logs", "logs_url"]


def logs_url(endpoint: str) -> str:
    """The OTLP/HTTP logs URL for a collector's base URL, its /v1/traces URL, or the logs URL itself."""
    base = endpoint.rstrip("/")
    if base.endswith("/v1/logs"):
        return base
    return base.removesuffix("/v1/traces") + "/v1/logs"


def emit_evaluation_logs(logger: Logger, results: Sequence[RunDiagnoses], parents: Mapping[str, SpanContext]) -> int:
    """One ``gen_ai.evaluation.result`` record per diagnosis, in its run's span context; how many."""
    from opentelemetry._logs import LogRecord

    n = 0
    for r in results:
        parent = parents.get(r.run_id)
        context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        for d in r.diagnoses:
            attributes: dict[str, Any] = {**evaluation_attributes(d), c.RUN_ID: r.run_id}
            logger.emit(LogRecord(event_name=EVENT, attributes=attributes, context=context))
            n += 1
    return n


class _Counting:
    """The real log exporter, counting the records it delivered per run; after a failure the rest fail
    at once (a one-shot send: waiting out the timeout batch after batch helps nobody)."""

    def __init__(self, inner: LogRecordExporter) -> None:
        self.inner = inner
        self.delivered: Counter[str] = Counter()
        self.failures = 0
        self.last_error: str | None = None
        self._lock = threading.Lock()

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        if self.failures:
            return LogRecordExportResult.FAILURE
        try:
            result = self.inner.export(batch)
        except Exception as exc:  # noqa: BLE001 - telemetry never raises into the analysis
            result, self.last_error = LogRecordExportResult.FAILURE, f"{type(exc).__name__}: {exc}"
        with self._lock:
            if result is LogRecordExportResult.SUCCESS:
                self.delivered.update(str((r.log_record.attributes or {}).get(c.RUN_ID)) for r in batch)
            else:
                self.failures += 1
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def send_evaluation_logs(source: Store | ParquetSource, results: Sequence[RunDiagnoses], endpoint: str, *,
                         timeout: float = OTLP_TIMEOUT) -> EvaluationReport:
    """Send the diagnoses of ``results`` to ``endpoint`` as log records (see the module docstring)."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    started = time.perf_counter()
    url = logs_url(endpoint)
    parents = run_parents(source, [r.run_id for r in results]) if results else {}
    with _folded_otlp_logs() as captured:
        exporter = _Counting(OTLPLogExporter(endpoint=url, timeout=timeout))
        provider = LoggerProvider(resource=Resource.create({"service.name": "looptrace-analyzer"}),
                                  shutdown_on_exit=False)
        queue = sum(len(r.diagnoses) for r in results) + 1  # every record kept until sent or failed
        provider.add_log_record_processor(BatchLogRecordProcessor(
            exporter, max_queue_size=queue, max_export_batch_size=min(512, queue)))  # type: ignore[arg-type]
        events = emit_evaluation_logs(provider.get_logger("looptrace.analyzer"), results, parents)
        provider.shutdown()
    failed = sum(1 for r in results if r.diagnoses and exporter.delivered.get(r.run_id, 0) == 0)
    return EvaluationReport(url, len(results), events, failed, exporter.last_error or captured.first,
                            time.perf_counter() - started)


def send_and_report(source: Store | ParquetSource, results: Sequence[RunDiagnoses], endpoint: str,
                    out: TextIO, *, span_events: bool = False) -> EvaluationReport:
    """``looptrace analyze --otlp-endpoint``: send (log records, or with ``span_events`` a span per run),
    then one line on ``out`` (a warning if it failed)."""
    if span_events:
        report = send_evaluations(source, results, endpoint)
    else:
        report = send_evaluation_logs(source, results, endpoint)
    if report.ok:
        print(f"sent {count(report.events, 'evaluation result')} ({count(report.runs, 'run')}) to {report.url}",
              file=out)
    else:
        print(f"warning: {report.failed_runs} of {report.runs} runs' evaluation results did not reach "
              f"{report.url}: {report.error or 'export failed'}", file=out)
    return report
