"""OTLP log records into ``collect``: joined to their spans in either order, durable, late ones kept.

The records are the SDK's own (``tests/genai_events.py``: a real LoggerProvider emitting
``gen_ai.client.inference.operation.details`` in each model call's span context, encoded by the SDK's
OTLP encoder). The crash is a receiver never stopped (its memory dropped, as ``kill -9`` drops it); the
last test kills a real ``collect`` process.
"""

from __future__ import annotations

import gzip
import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.logs_protocol import logs_of
from looptrace.tracer.ingest.otlp.protocol import JSON, PROTOBUF, spans_of

from .conftest import PYTHON, ROOT, python_env, query
from .genai_events import build
from .test_ingest import post

STEPS_SQL = "SELECT step, thought, tool, args, observation FROM steps ORDER BY step, call_index"


def _reference(tmp_path: Path) -> list[tuple[Any, ...]]:
    """The steps of the same run with its content on the spans."""
    db = tmp_path / "reference.duckdb"
    spans, _ = build(content_on_spans=True)
    with OtlpReceiver(db, port=None, settle=0) as r:
        assert r.ingest(spans_of(spans))
    return query(db, STEPS_SQL)


@pytest.mark.parametrize("order", ["logs-first", "spans-first"])
def test_records_before_or_after_their_spans_fill_the_same_steps(order: str, tmp_path: Path) -> None:
    reference = _reference(tmp_path)
    assert [r[2] for r in reference] == ["read_file", "read_file", None] and reference[0][4] == "contents of 0.txt"
    spans, logs = build()
    db = tmp_path / "store.duckdb"
    with OtlpReceiver(db, port=None, settle=2.0) as r:  # wide: a loaded machine's fsync comes in between
        first, second = (logs_of(logs), spans_of(spans)) if order == "logs-first" else (spans_of(spans), logs_of(logs))
        assert (r.ingest_logs if order == "logs-first" else r.ingest)(first)  # type: ignore[arg-type]
        assert (r.ingest if order == "logs-first" else r.ingest_logs)(second)  # type: ignore[arg-type]
        assert r.stats.traces_written == 0  # the trace waits for settle, its records with it
    assert query(db, STEPS_SQL) == reference
    assert query(db, "SELECT status, count(*), count(run_id) FROM log_records GROUP BY ALL") == [("joined", 3, 3)]


def test_records_of_a_crashed_receivers_open_trace_are_taken_back(db: Path) -> None:
    spans, logs = build(end_root=False)
    records = logs_of(logs)
    crashed = OtlpReceiver(db, port=None, settle=0.5)  # never started or stopped: dropped like a kill -9
    assert crashed.ingest(spans_of(spans)) and crashed.ingest_logs(records)
    assert crashed.stats.spans_written == 0 and crashed.stats.logs_written == 0
    with OtlpReceiver(db, port=None, settle=0.5) as second:
        assert second.stats.recovered_logs == len(records) == 3
        assert second.ingest_logs(records[:2])  # a retry of a request whose answer the crash swallowed
    assert second.stats.duplicate_logs == 2
    assert query(db, "SELECT count(*), count(DISTINCT log_id), count(*) FILTER (status = 'joined') "
                     "FROM log_records") == [(3, 3, 3)]
    assert [r[2:4] for r in query(db, STEPS_SQL)][:2] == [("read_file", '{"path":"0.txt"}'),
                                                          ("read_file", '{"path":"1.txt"}')]
    assert query(db, "SELECT count(*) FROM received_logs ANTI JOIN log_records USING (log_id)") == [(0,)]


@pytest.mark.slow
@pytest.mark.parametrize("lag", ["within-settle", "after-settle"])
def test_records_lagging_their_spans_are_joined_or_kept_as_late_never_dropped(lag: str, db: Path) -> None:
    """A sender whose log batches lag its span batches: within ``settle`` they are joined; later than
    that the trace is written without them, and they are kept under its run as 'late' and counted."""
    settle = 2.0
    spans, logs = build()
    records = logs_of(logs)
    with OtlpReceiver(db, port=None, settle=settle) as r:
        assert r.ingest(spans_of(spans))
        time.sleep(settle * 0.1 if lag == "within-settle" else settle * 2.5)
        assert r.ingest_logs(records)
    late = lag == "after-settle"
    assert r.stats.late_logs == (3 if late else 0)
    assert query(db, "SELECT status, count(*), count(run_id) FROM log_records GROUP BY ALL") == \
        [("late" if late else "joined", 3, 3)]
    args = [a for (a,) in query(db, "SELECT args FROM steps WHERE tool IS NOT NULL")]
    assert args == ([None, None] if late else ['{"path":"0.txt"}', '{"path":"1.txt"}'])


def test_logs_over_http_json_gzip_and_the_refusals(tmp_path: Path) -> None:
    spans, logs = build()
    doc = json_format.MessageToDict(logs)
    import base64
    for rl in doc["resourceLogs"]:
        for sl in rl["scopeLogs"]:
            for rec in sl["logRecords"]:
                for key in ("traceId", "spanId"):
                    rec[key] = base64.b64decode(rec[key]).hex()
    db = tmp_path / "store.duckdb"
    with OtlpReceiver(db, port=0, settle=0.3) as r:
        base = r.url.replace("/v1/traces", "")
        status, _, body = post(base + "/v1/logs", gzip.compress(json.dumps(doc).encode()), JSON, encoding="gzip")
        assert (status, body) == (200, b"{}")
        assert post(base + "/v1/traces", spans.SerializeToString())[0] == 200
        status, _, body = post(base + "/v1/logs", b"\x00not protobuf", PROTOBUF)
        assert status == 400 and b"ExportLogsServiceRequest" in body
        status, _, body = post(base + "/v1/log", b"{}", JSON)
        assert status == 404 and b"/v1/logs" in body
        assert post(base + "/v1/logs", b"{}", "text/plain")[0] == 415
    assert query(db, "SELECT status, count(*) FROM log_records GROUP BY ALL") == [("joined", 3)]
    assert query(db, "SELECT count(*) FROM steps WHERE args IS NOT NULL") == [(2,)]


def test_unknown_records_and_records_of_no_trace_are_kept(db: Path) -> None:
    spans, logs = build()
    records = logs_of(logs)
    from dataclasses import replace
    stray = [replace(records[0], log_id="a" * 32, trace_id=None, span_id=None),
             replace(records[1], log_id="b" * 32, event_name="app.something")]
    with OtlpReceiver(db, port=None, settle=0) as r:
        assert r.ingest_logs(stray) and r.ingest(spans_of(spans))
    assert sorted(query(db, "SELECT event_name, status, trace_id IS NULL FROM log_records")) == [
        ("app.something", "kept", False), ("gen_ai.client.inference.operation.details", "kept", True)]


@pytest.mark.slow
def test_kill_9_after_acknowledging_log_records_of_an_open_trace_loses_none(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    said: list[str] = []

    def start() -> tuple[subprocess.Popen[str], str]:
        """A collect on the port the kernel gives it, and its URL (its "listening on" line names it)."""
        proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                                 "--grpc-port", "off", "--settle", "0.5", "--diagnose-every", "0"], cwd=ROOT,
                                env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        while "listening on" not in (line := proc.stdout.readline()):
            assert line, proc.stderr.read() if proc.stderr else ""
            said.append(line)
        [url] = re.findall(r"http://127\.0\.0\.1:\d+", line)
        return proc, url

    spans, logs = build(end_root=False)
    open_spans = spans_of(spans)
    collect, url = start()
    assert post(url + "/v1/traces", spans.SerializeToString())[0] == 200
    assert post(url + "/v1/logs", logs.SerializeToString())[0] == 200
    collect.kill()  # SIGKILL right after the 200s: the trace is open, its records in memory and journal
    collect.wait(timeout=30)
    assert query(db, "SELECT count(*) FROM log_records") == [(0,)]
    collect, _ = start()  # takes the open trace back; stopped, it writes it (its root never ended)
    assert any("3 log records of open traces taken back" in line for line in said), said
    collect.send_signal(signal.SIGINT)
    out, err = collect.communicate(timeout=60)
    assert collect.returncode == 0, err
    assert "3 log records written (0 late, 0 duplicates dropped" in out, out
    assert query(db, "SELECT status, count(*) FROM log_records GROUP BY ALL") == [("joined", 3)]
    assert query(db, "SELECT count(*) FROM steps WHERE args IS NOT NULL AND observation IS NOT NULL") == [(2,)]
    assert query(db, "SELECT count(*) FROM spans") == [(len(open_spans),)]
    assert query(db, "SELECT count(*) FROM received_logs ANTI JOIN log_records USING (log_id)") == [(0,)]


def _otlp_json(message: Any, kind: str) -> dict[str, Any]:
    """OTLP/JSON as the Collector's file exporter writes it (hex ids)."""
    import base64
    doc = json_format.MessageToDict(message)
    items = {"logs": ("resourceLogs", "scopeLogs", "logRecords"), "spans": ("resourceSpans", "scopeSpans", "spans")}
    top, scope, leaf = items[kind]
    for r in doc[top]:
        for sc in r[scope]:
            for rec in sc[leaf]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if rec.get(key):
                        rec[key] = base64.b64decode(rec[key]).hex()
    return doc


def test_import_reads_a_log_file_beside_its_trace_file(tmp_path: Path) -> None:
    from looptrace.tracer.ingest.files.importing import import_paths
    from looptrace.tracer.store import Store
    reference = _reference(tmp_path)
    spans, logs = build()
    other_spans, other_logs = build()  # a second run whose trace file is not imported: records kept
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "traces.json").write_text(json.dumps(_otlp_json(spans, "spans")) + "\n")
    (folder / "logs.json").write_text("\n".join(json.dumps(_otlp_json(m, "logs")) for m in (logs, other_logs)) + "\n")
    db = tmp_path / "store.duckdb"
    report = import_paths(Store(db), [folder])
    assert report.skipped == [] and report.runs_imported == 1 and report.log_records_imported == 6
    assert query(db, STEPS_SQL) == reference
    assert query(db, "SELECT status, count(*), count(run_id) FROM log_records GROUP BY ALL ORDER BY 1") == [
        ("joined", 3, 3), ("kept", 3, 0)]
    again = import_paths(Store(db), [folder])  # importing twice adds nothing
    assert again.runs_imported == 0 and again.log_records_imported == 0
    assert query(db, "SELECT count(*) FROM log_records") == [(6,)]


def test_logs_refusals_over_grpc_and_random_bodies_over_http(tmp_path: Path) -> None:
    """The trace path's answers: a malformed request is INVALID_ARGUMENT (gRPC) or a 4xx (HTTP), never a
    5xx, and the connection stays usable; a valid request right after is taken."""
    import random

    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc

    spans, logs = build()
    bad = type(logs)()
    bad.CopyFrom(logs)
    bad.resource_logs[0].scope_logs[0].log_records[0].span_id = b"\x01\x02\x03"  # not 8 bytes
    db = tmp_path / "store.duckdb"
    with OtlpReceiver(db, port=0, grpc_port=0, settle=0) as r:
        with grpc.insecure_channel(r.grpc_url.removeprefix("http://")) as channel:
            stub = logs_service_pb2_grpc.LogsServiceStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Export(bad, timeout=10)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "spanId" in str(refused.value.details())
            stub.Export(logs, timeout=10)
        url = r.url.replace("/v1/traces", "/v1/logs")
        rng = random.Random(37)
        raw = logs.SerializeToString()
        for _ in range(40):
            body = rng.choice([bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200))), raw[:rng.randint(1, len(raw))],
                               json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{"spanId": "zz"}]}]}]}).encode()])
            status = post(url, body, rng.choice([PROTOBUF, JSON]))[0]
            assert 200 <= status < 500 and status != 0, status
        assert post(url, raw)[0] == 200
        assert r.ingest(spans_of(spans))
    assert query(db, "SELECT status, count(*) FROM log_records GROUP BY ALL") == [("joined", 3)]


def test_a_secret_in_a_log_record_is_in_no_file(tmp_path: Path) -> None:
    """Redacted in the sink like every record: in the journal before the answer, and in log_records."""
    from dataclasses import replace
    secret = "sk-ant-api03-PLANTEDsecretKEY0123456789abcdef"
    spans, logs = build(end_root=False)
    records = logs_of(logs)
    leaky = replace(records[0], log_id="c" * 32, body={"content": f"my key is {secret}"},
                    event_name="gen_ai.user.message")
    db = tmp_path / "store.duckdb"
    crashed = OtlpReceiver(db, port=None, settle=0.5)  # journals only
    assert crashed.ingest(spans_of(spans)) and crashed.ingest_logs([leaky, *records])
    with OtlpReceiver(db, port=None, settle=0.5):
        pass  # takes it back and writes it at stop
    for path in [p for p in tmp_path.rglob("*") if p.is_file()]:
        assert secret.encode() not in path.read_bytes(), path
    [(body,)] = query(db, "SELECT body FROM log_records WHERE log_id = ?", ["c" * 32])
    assert "[REDACTED:" in body
