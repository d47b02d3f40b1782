"""GenAI log records that lag their spans: joined, or kept as late, and never dropped (issue 37).

A real ``OtlpReceiver`` (OTLP/HTTP, ``settle`` S) and a sender in this process: an agent's spans go out
as they end (the SDK's ``SimpleSpanProcessor`` and OTLP/HTTP exporter), its content as
``gen_ai.client.inference.operation.details`` log records through the SDK's ``BatchLogRecordProcessor``
whose schedule delay is the lag (a record waits up to that long before its batch is sent). For each
lag (a fraction of S) the table says how many records were stored (goal: every one sent) and how many
of them were joined to their spans (the rest are stored as ``late``, under their run).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.store import Store

from .results import Result
from .rounds import scratch_dir

TITLE = "GenAI log records lagging their spans (collect, OTLP/HTTP)"
SETTLE = 1.0
LAGS = (0.5, 1.0, 2.0)  # the log batches' delay, in units of SETTLE
DETAILS = "gen_ai.client.inference.operation.details"


def _agent(tracer: Any, logger: Any, n: int, steps: int = 2) -> int:
    """One run of ``steps`` tool steps; returns the records emitted."""
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": f"task {n}"}]}]
    emitted = 0
    with tracer.start_as_current_span(f"invoke_agent bench-{n}", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"bench-{n}"}):
        for i in range(steps + 1):
            final = i == steps
            reply = {"role": "assistant", "parts": [{"type": "text", "content": "done" if final else f"step {i}"}]
                     + ([] if final else [{"type": "tool_call", "id": f"c{i}", "name": "read_file",
                                           "arguments": {"path": f"{i}.txt"}}])}
            with tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
                logger.emit(LogRecord(event_name=DETAILS, attributes={
                    "gen_ai.input.messages": list(history), "gen_ai.output.messages": [reply]}))
                emitted += 1
            history.append(reply)
            if not final:
                with tracer.start_as_current_span("execute_tool read_file", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": f"c{i}"}):
                    pass
                history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": f"c{i}",
                                                           "response": f"contents {i}"}]})
            time.sleep(0.05)
    return emitted


def _one(folder: Path, lag: float, runs: int) -> tuple[int, int, int, int]:
    """(records sent, stored, joined, late) for log batches delayed by ``lag`` * SETTLE."""
    db = folder / f"lag-{lag}.duckdb"
    with OtlpReceiver(db, port=0, settle=SETTLE) as receiver:
        resource = Resource.create({"service.name": "log-lag"})
        tp = TracerProvider(resource=resource)
        tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=receiver.url)))
        lp = LoggerProvider(resource=resource)
        lp.add_log_record_processor(BatchLogRecordProcessor(
            OTLPLogExporter(endpoint=receiver.url.replace("/v1/traces", "/v1/logs")),
            schedule_delay_millis=int(lag * SETTLE * 1000)))
        sent = sum(_agent(tp.get_tracer("bench"), lp.get_logger("bench"), n) for n in range(runs))
        tp.shutdown()
        lp.shutdown()
        time.sleep(SETTLE * 1.5)
    with Store(db).reader(locked_down=False) as conn:
        counts = dict(conn.execute("SELECT status, count(*) FROM log_records GROUP BY ALL").fetchall())
    return sent, sum(counts.values()), counts.get("joined", 0), counts.get("late", 0)


def run(quick: bool = False) -> list[Result]:
    runs = 5 if quick else 20
    out = []
    with scratch_dir("log-lag") as folder:
        for lag in LAGS:
            sent, stored, joined, late = _one(folder, lag, runs)
            out.append(Result(f"records stored, logs lagging {lag:g} x settle ({SETTLE:g} s)", "records", stored,
                              sent, "all sent", stored == sent,
                              f"{joined} joined to their spans, {late} kept as late"))
    return out
