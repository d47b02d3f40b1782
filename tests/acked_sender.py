"""An agent exporting GenAI-convention runs over real OTLP (HTTP or gRPC) exporters, noting what was acked.

usage: python -m tests.acked_sender PROTOCOL ENDPOINT TAG TRACES STEPS PAUSE
PROTOCOL is ``http`` or ``grpc``. Each trace is one ``invoke_agent`` span with STEPS pairs of ``chat``
and ``execute_tool`` spans, one step every PAUSE seconds, exported by the SDK's BatchSpanProcessor
through the real exporter with its own retries. Every batch the exporter reports a success for was
acknowledged by the receiver: its span ids are printed as ``acked <id>`` lines, then ``failed N``
(spans of batches that were never acknowledged).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

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
    send_traces(tracer, tag, traces, steps, pause)
    provider.force_flush(timeout_millis=180_000)
    provider.shutdown()
    out = [f"acked {s}" for s in noting.acked] + [f"failed {noting.failed}"]
    print("\n".join(out), flush=True)


if __name__ == "__main__":
    main()
