"""A process exporting GenAI-convention agent traces over OTLP/HTTP, for the receiver's tests and measurement.

usage: python -m tests.otlp_sender URL TAG TRACES STEPS [grpc]
Each trace is one ``invoke_agent`` span with STEPS pairs of ``chat`` and ``execute_tool`` spans
(1 + 2 * STEPS spans), exported by the SDK's BatchSpanProcessor and the real OTLP/HTTP exporter (with
``grpc``, the real OTLP/gRPC exporter, URL being ``http://host:port``).
Prints "sent N spans in S s" once force_flush has returned (every request answered).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer

DETAILS = "gen_ai.client.inference.operation.details"


def send_traces(tracer: Tracer, tag: str, traces: int, steps: int, pause: float = 0.0, logger: Any = None,
                stop: threading.Event | None = None) -> int:
    """``traces`` agent runs of ``steps`` steps each (a chat span and an echo tool span per step),
    in the GenAI conventions; ``pause`` seconds after each step keeps a run open for a while. With a
    ``logger``, each chat's messages go out as a ``gen_ai.client.inference.operation.details`` log
    record in its span's context (``EVENT_ONLY``), as well as none on the span. Once ``stop`` is set,
    no new run starts (the one under way ends whole). Returns how many runs were sent."""
    for t in range(traces):
        if stop is not None and stop.is_set():
            return t
        agent = f"{tag}-agent-{t}"
        with tracer.start_as_current_span(f"invoke_agent {agent}", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": agent}):
            for i in range(steps):
                with tracer.start_as_current_span("chat gpt-4o", attributes={
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                        "gen_ai.usage.input_tokens": 100 + i, "gen_ai.usage.output_tokens": 10}):
                    if logger is not None:
                        from opentelemetry._logs import LogRecord
                        logger.emit(LogRecord(event_name=DETAILS, attributes={"gen_ai.output.messages": [
                            {"role": "assistant", "parts": [{"type": "text", "content": f"{agent} thinks {i}"}]}]}))
                with tracer.start_as_current_span("execute_tool echo", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo",
                        "gen_ai.tool.call.id": f"{agent}-{i}",
                        "gen_ai.tool.call.arguments": json.dumps({"i": i}),
                        "gen_ai.tool.call.result": f"{agent} {i}"}):
                    pass
                if pause:
                    time.sleep(pause)
    return traces


def main() -> None:
    url, tag, traces, steps = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    total = traces * (1 + 2 * steps)
    provider = TracerProvider(resource=Resource.create({"service.name": f"sender-{tag}"}))
    # A queue that holds everything: this measures the receiver, not the SDK's drop policy.
    grpc = sys.argv[5:] == ["grpc"]
    exporter = GrpcSpanExporter(endpoint=url, insecure=True) if grpc else OTLPSpanExporter(endpoint=url)
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=total + 1,
                                                   schedule_delay_millis=100))
    tracer = provider.get_tracer("otlp_sender")
    started = time.perf_counter()
    send_traces(tracer, tag, traces, steps)
    ok = provider.force_flush(timeout_millis=120_000)
    elapsed = time.perf_counter() - started
    provider.shutdown()
    print(f"sent {total} spans in {elapsed:.3f} s", flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
