"""Diagnoses as OpenTelemetry GenAI evaluation events, sent to an OTLP backend: as span events here
(``looptrace analyze --otlp-endpoint URL --evaluation-span-events``, for backends that take no logs);
by default as log records (``evaluation_logs.py``).

One span per analysed run, ``looptrace.analyze {run}``: a child of the run's ``invoke_agent`` span
when the store knows the run's trace and span ids (so the verdict shows up inside the run's trace in
the backend), else a root span. It carries one ``gen_ai.evaluation.result`` event per diagnosis.
Sent with the SDK's OTLP/HTTP exporter and batch processor and flushed before returning; an
endpoint that is down costs one warning, never the analysis (the SDK's own per-batch error logs are
folded into that warning).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, Tracer

from looptrace.tracer.records import conventions as c
from looptrace.tracer.store import Store

from looptrace.tracer.spans.otlp import OTLP_TIMEOUT, CountingSpanExporter, traces_url
from looptrace.tracer.export.source import ParquetSource

if TYPE_CHECKING:
    from .analyzer import Diagnosis, RunDiagnoses

__all__ = [
    "send_evaluations", "record_evaluations", "evaluation_attributes", "run_parents",
    "EvaluationReport", "EVENT", "EVALUATION_NAME",
]

EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "looptrace.failure"
ATTR_NAME = "gen_ai.evaluation.name"
ATTR_LABEL = "gen_ai.evaluation.score.label"
ATTR_VALUE = "gen_ai.evaluation.score.value"
ATTR_EXPLANATION = "gen_ai.evaluation.explanation"
ATTR_FIRST_STEP = "looptrace.evaluation.first_step"
ATTR_LAST_STEP = "looptrace.evaluation.last_step"
PRIMARY_SCORE = 1.0
SECONDARY_SCORE = 0.5
SPAN_NAME = "looptrace.analyze {run_id}"

# The run's own span: from its latest record (start and end records name the same span).
RUN_SPANS_SQL = """
SELECT run_id, trace_id, span_id FROM run_records
WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND trace_id IS NOT NULL AND span_id IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY run_id ORDER BY recorded_at DESC) = 1
"""

# Loggers of the SDK's OTLP/HTTP exporter, which log each failed batch (and each retry).
_OTLP_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter", "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
)


def evaluation_attributes(d: Diagnosis) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        ATTR_NAME: EVALUATION_NAME,
        ATTR_LABEL: d.label,
        ATTR_VALUE: PRIMARY_SCORE if d.is_primary else SECONDARY_SCORE,
        ATTR_EXPLANATION: d.explanation,
    }
    if d.first_step is not None:
        attrs[ATTR_FIRST_STEP] = d.first_step
    if d.last_step is not None:
        attrs[ATTR_LAST_STEP] = d.last_step
    return attrs


def run_parents(source: Store | ParquetSource, run_ids: Sequence[str]) -> dict[str, SpanContext]:
    """The span context of each run's ``invoke_agent`` span, where the source knows it."""
    with source.reader(locked_down=False) as conn:
        rows = conn.execute(RUN_SPANS_SQL, [list(run_ids)]).fetchall()
    parents = {}
    for run_id, trace_id, span_id in rows:
        try:
            parents[run_id] = SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                                          trace_flags=TraceFlags(TraceFlags.SAMPLED))
        except ValueError:
            continue  # not hex: an id from another system; the evaluation becomes a root span
    return {k: v for k, v in parents.items() if v.is_valid}


def record_evaluations(
    tracer: Tracer, results: Sequence[RunDiagnoses], parents: Mapping[str, SpanContext]
) -> int:
    """One span per run, one event per diagnosis; returns the number of events."""
    events = 0
    for r in results:
        parent = parents.get(r.run_id)
        context = trace.set_span_in_context(NonRecordingSpan(parent)) if parent else None
        attributes = {c.RUN_ID: r.run_id, c.RUN_STATUS: r.status}
        with tracer.start_as_current_span(SPAN_NAME.format(run_id=r.run_id), context=context,
                                          attributes=attributes) as span:
            for d in r.diagnoses:
                span.add_event(EVENT, attributes=evaluation_attributes(d))
                events += 1
    return events


@dataclass(frozen=True)
class EvaluationReport:
    url: str
    runs: int
    events: int
    failed_runs: int  # runs whose span did not reach the backend
    error: str | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.failed_runs == 0


class _Captured(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None  # the first says why (later ones say "retries exhausted")

    def filter(self, record: logging.LogRecord) -> bool:
        if self.first is None:
            self.first = " ".join(record.getMessage().split())[:300]
        return False


@contextmanager
def _folded_otlp_logs() -> Iterator[_Captured]:
    captured = _Captured()
    loggers = [logging.getLogger(name) for name in _OTLP_LOGGERS]
    for lg in loggers:
        lg.addFilter(captured)
    try:
        yield captured
    finally:
        for lg in loggers:
            lg.removeFilter(captured)


def send_evaluations(
    source: Store | ParquetSource, results: Sequence[RunDiagnoses], endpoint: str, *,
    timeout: float = OTLP_TIMEOUT,
) -> EvaluationReport:
    """Send the diagnoses of ``results`` to ``endpoint`` (a collector's base URL or its /v1/traces URL)."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    started = time.perf_counter()
    url = traces_url(endpoint)
    parents = run_parents(source, [r.run_id for r in results]) if results else {}
    with _folded_otlp_logs() as captured:
        exporter = CountingSpanExporter(OTLPSpanExporter(endpoint=url, timeout=timeout),
                                        stop_after_failure=True)
        provider = TracerProvider(resource=Resource.create({"service.name": "looptrace-analyzer"}),
                                  shutdown_on_exit=False)
        # Queue as large as the input: every run's span is kept until sent or failed.
        queue = len(results) + 1
        provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=queue,
                                                       max_export_batch_size=min(512, queue)))
        events = record_evaluations(provider.get_tracer("looptrace.analyzer"), results, parents)
        provider.shutdown()
    failed = sum(1 for r in results if exporter.delivered.get(r.run_id, 0) == 0)
    return EvaluationReport(url, len(results), events, failed, exporter.last_error or captured.first,
                            time.perf_counter() - started)
