"""An agent exporting GenAI-convention runs over real OTLP (HTTP or gRPC) exporters, noting what was acked.

usage: python -m tests.acked_sender PROTOCOL ENDPOINT TAG TRACES STEPS PAUSE [logs]
PROTOCOL is ``http`` or ``grpc``. It sends at most TRACES runs, fewer when its stdin gives a line or
ends first: the run under way ends whole, and no new one starts (``traces N`` says how many were sent).
A test that needs traffic for as long as it works on the receiver (the kill -9 test) stops it then,
instead of waiting out a number of runs sized for a slow machine. With ``logs``, each chat's messages also go out as a GenAI log record
through the SDK's real OTLP log exporter and batch processor; the records acknowledged are counted
(``acked_logs N``, ``failed_logs N``). Each trace is one ``invoke_agent`` span with STEPS pairs of ``chat``
and ``execute_tool`` spans, one step every PAUSE seconds, exported by the SDK's BatchSpanProcessor
through the real exporter with its own retries. Every batch the exporter reports a success for was
acknowledged by the receiver: its span ids are printed as ``acked <id>`` lines, then ``failed N``
(spans of batches that were never acknowledged).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from .otlp_sender import send_traces


class Noting(SpanExporter):
    """The real exporter, and a note of which spans it delivered."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.acked: list[str] = []
        self.failed = 0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        # The exporter gives up after 6 tries (about 31 s of backoff); a receiver killed again and again
        # on a loaded machine can be down for most of that. Try the batch again, as a Collector's
        # sending queue would: a batch counts as acknowledged only once a receiver answered it.
        for _ in range(4):
            result = self.inner.export(spans)
            if result is SpanExportResult.SUCCESS:
                break
        with self._lock:
            if result is SpanExportResult.SUCCESS:
                self.acked.extend(f"{s.context.span_id:016x}" for s in spans if s.context)
            else:
                self.failed += len(spans)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class NotingLogs:
    """The real log exporter, retried as ``Noting`` retries, counting the records it delivered."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.acked, self.failed = inner, 0, 0

    def export(self, batch: Sequence[Any]) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult
        for _ in range(4):
            result = self.inner.export(batch)
            if result is LogRecordExportResult.SUCCESS:
                self.acked += len(batch)
                return result
        self.failed += len(batch)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def log_exporter(protocol: str, endpoint: str) -> Any:
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs

        return GrpcLogs(endpoint=endpoint, insecure=True, timeout=60)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs

    return HttpLogs(endpoint=endpoint.replace("/v1/traces", "/v1/logs"), timeout=60)


def exporter(protocol: str, endpoint: str) -> SpanExporter:
    # A 60 s budget of retries: a receiver killed and started again is back within a few seconds.
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as Grpc

        return Grpc(endpoint=endpoint, insecure=True, timeout=60)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as Http

    return Http(endpoint=endpoint, timeout=60)


def main() -> None:
    protocol, endpoint, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    traces, steps, pause = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    noting = Noting(exporter(protocol, endpoint))
    provider = TracerProvider(resource=Resource.create({"service.name": f"sender-{tag}"}))
    provider.add_span_processor(BatchSpanProcessor(noting, max_queue_size=100_000, schedule_delay_millis=100,
                                                   max_export_batch_size=16))
    tracer = provider.get_tracer("acked_sender")
    logs = None
    if sys.argv[7:] == ["logs"]:
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        logs = NotingLogs(log_exporter(protocol, endpoint))
        logger_provider = LoggerProvider(resource=provider.resource)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(
            logs, max_queue_size=100_000, schedule_delay_millis=100, max_export_batch_size=16))  # type: ignore[arg-type]
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    sent = send_traces(tracer, tag, traces, steps, pause, logger_provider.get_logger("acked_sender") if logs else None,
                       stop=stop)
    provider.force_flush(timeout_millis=180_000)
    provider.shutdown()
    out = [f"traces {sent}"] + [f"acked {s}" for s in noting.acked] + [f"failed {noting.failed}"]
    if logs is not None:
        logger_provider.force_flush(timeout_millis=180_000)
        logger_provider.shutdown()
        out += [f"acked_logs {logs.acked}", f"failed_logs {logs.failed}"]
    print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
