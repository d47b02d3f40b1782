"""Parquet export and OTLP out: the same rows over a store and its export, incremental exports that
never duplicate, and OTLP endpoints that are dead or slow costing the agent nothing it cannot bound."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider

from looptrace.loop.demo import run_scenarios
from looptrace.loop.scenarios import SCENARIOS
from looptrace.replay.analyzer import analyze_store
from looptrace.tracer import Tracing
from looptrace.tracer.export import ExportError, ParquetSource, export_parquet, open_source
from looptrace.tracer.export.layout import MANIFEST, part_files
from looptrace.tracer.spans.otlp import CountingSpanExporter, OtlpSpanProcessor
from looptrace.tracer.export.parquet import parse_since
from looptrace.tracer.query.sql import QueryError, run_query
from looptrace.tracer.store import SCHEMA_VERSION, Store

from .conftest import PYTHON, ROOT, python_env, query

# The documented views, and the base tables that no view shows whole.
COMPARED = ("runs", "steps", "tool_calls", "llm_calls", "diagnoses", "spans", "writer_stats", "run_records")


def looptrace(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in python_env().items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)


def rows(source: Store | ParquetSource, sql: str) -> list[tuple[Any, ...]]:
    with source.reader() as conn:
        return conn.execute(sql).fetchall()


def copy_store(db: Path, dest: Path) -> Path:
    Store(db).compact()
    shutil.copy(db, dest)
    return dest


@pytest.fixture(scope="module")
def exported(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "parquet"
    export_parquet(demo, folder)
    return folder


# -- layout ----------------------------------------------------------------------------------------


def test_the_folder_is_partitioned_by_table_day_and_agent(demo: Path, exported: Path) -> None:
    manifest = json.loads((exported / MANIFEST).read_text())
    assert manifest["format"] == "looptrace-parquet" and manifest["schema_version"] == SCHEMA_VERSION
    (entry,) = manifest["exports"]
    assert manifest["high_water"] == entry["high_water"] and manifest["diagnoses_export"] == entry["id"]
    assert entry["runs"] == query(demo, "SELECT count(*) FROM runs")[0][0] == 15
    for table, n in entry["rows"].items():
        assert n == query(demo, f"SELECT count(*) FROM {table}")[0][0], table
    files = sorted(p.relative_to(exported) for p in exported.rglob("*.parquet"))
    agents = {a for (a,) in query(demo, "SELECT DISTINCT agent FROM runs")}
    day = query(demo, "SELECT DISTINCT CAST(started_at AS DATE) FROM runs")[0][0].isoformat()
    for path in files:
        table, *keys, name = path.parts
        assert name == f"part-{entry['id']}-0.parquet"
        if table == "table=writer_stats":
            assert keys == [f"day={day}"]
        else:
            assert keys[0] == f"day={day}" and keys[1].removeprefix("agent=") in agents, path
    tables = ("run_records", "step_records", "tool_call_records", "llm_call_records", "spans", "diagnoses")
    assert {p.parts[0] for p in files} >= {f"table={t}" for t in tables}
    # Each file carries its partition columns, so it reads the same without Hive partitioning.
    some = next(p for p in files if p.parts[0] == "table=step_records")
    cols = [r[0] for r in duckdb.connect().execute(
        f"DESCRIBE SELECT * FROM read_parquet('{exported / some}', hive_partitioning = false)").fetchall()]
    assert cols[-2:] == ["day", "agent"] and cols[0] == "run_id"


# -- the same rows, the same diagnoses -------------------------------------------------------------


def same_rows(store: Store, export: ParquetSource) -> None:
    """Every view and base table: identical rows over the store and over the export."""
    with store.reader() as a, export.reader() as b:
        for view in COMPARED:
            sql = f"SELECT * FROM {view} ORDER BY ALL"
            expected = a.execute(sql).fetchall()
            assert expected, view
            assert b.execute(sql).fetchall() == expected, view


def test_every_view_gives_identical_rows_over_the_store_and_the_export(demo: Path, exported: Path) -> None:
    same_rows(Store(demo), ParquetSource(exported))


def test_analyze_over_the_export_gives_the_store_s_diagnoses(demo: Path, exported: Path) -> None:
    def key(results: list[Any]) -> list[tuple[Any, ...]]:
        return sorted((r.run_id, d.label, d.is_primary, d.first_step, d.last_step)
                      for r in results for d in r.diagnoses)

    over_parquet = key(analyze_store(ParquetSource(exported), write=False))
    assert over_parquet == key(analyze_store(Store(demo), write=False))
    stored = query(demo, "SELECT run_id, label, is_primary, first_step, last_step FROM diagnoses")
    assert over_parquet == sorted(stored)
    with pytest.raises(ExportError, match="read-only"):
        analyze_store(ParquetSource(exported))


def test_sql_and_analyze_commands_read_the_folder_locked_down(demo: Path, exported: Path,
                                                             tmp_path: Path) -> None:
    before = sorted((p, p.stat().st_mtime_ns) for p in exported.rglob("*") if p.is_file())
    sql = "SELECT status, count(*) AS n FROM runs GROUP BY 1 ORDER BY 1"
    result = looptrace("sql", "--db", str(exported), sql, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert [(r["status"], r["n"]) for r in json.loads(result.stdout)] == query(demo, sql)
    out = tmp_path / "leak.csv"
    for attack in (f"SELECT * FROM read_csv('{demo}')", f"SELECT * FROM read_text('{exported}/../x')",
                   f"COPY (SELECT 1) TO '{out}'", "SET enable_external_access = true",
                   "ATTACH ':memory:' AS m", "LOAD httpfs"):
        with pytest.raises(QueryError):
            run_query(open_source(exported), attack)
    refused = looptrace("sql", "--db", str(exported), f"SELECT * FROM read_csv('{demo}')")
    assert refused.returncode == 1 and refused.stderr.startswith("error: ") and "disabled" in refused.stderr
    assert not out.exists()
    analysed = looptrace("analyze", "--db", str(exported), "--json")
    assert analysed.returncode == 0, analysed.stderr
    labels = sorted((r["run_id"], d["label"], d["is_primary"]) for r in json.loads(analysed.stdout)
                    for d in r["diagnoses"])
    assert labels == sorted(query(demo, "SELECT run_id, label, is_primary FROM diagnoses"))
    assert sorted((p, p.stat().st_mtime_ns) for p in exported.rglob("*") if p.is_file()) == before


# -- incremental exports ---------------------------------------------------------------------------


def test_an_incremental_export_adds_only_the_new_runs(demo: Path, tmp_path: Path) -> None:
    db = copy_store(demo, tmp_path / "store.duckdb")
    folder = tmp_path / "parquet"
    first = export_parquet(db, folder)
    old_runs = {r for (r,) in rows(ParquetSource(folder), "SELECT run_id FROM runs")}
    old_files = {p for p in folder.rglob("*.parquet") if "table=diagnoses" not in p.parts}

    run_scenarios(db, SCENARIOS[:2])
    analyze_store(Store(db))
    result = looptrace("export", "--db", str(db), "--parquet", str(folder), "--since", "auto")
    assert result.returncode == 0, result.stderr
    assert "exported 2 runs" in result.stdout and "rows/s" in result.stdout
    assert "--since auto" in result.stdout

    manifest = json.loads((folder / MANIFEST).read_text())
    assert [e["runs"] for e in manifest["exports"]] == [first.runs, 2]
    second = manifest["exports"][1]
    assert second["since"] is not None and second["rows"]["run_records"] == 4  # start and end of each
    new_files = {p for p in folder.rglob("*.parquet") if "table=diagnoses" not in p.parts} - old_files
    assert new_files and all(second["id"] in p.name for p in new_files)
    assert old_files <= set(folder.rglob("*.parquet"))  # nothing rewritten
    source = ParquetSource(folder)
    assert rows(source, "SELECT count(*), count(DISTINCT run_id) FROM runs") == [(17, 17)]
    assert {r for (r,) in rows(source, "SELECT run_id FROM runs")} - old_runs == {
        r for (r,) in query(db, "SELECT run_id FROM runs")} - old_runs
    same_rows(Store(db), source)
    # Diagnoses are a snapshot: only the latest export's files remain.
    diagnoses = part_files(folder, "diagnoses")
    assert diagnoses and all(second["id"] in p.name for p in diagnoses)

    again = export_parquet(db, folder, since="auto")
    assert again.runs == 0 and again.total_rows == 0 and part_files(folder, "diagnoses") == diagnoses
    assert len(json.loads((folder / MANIFEST).read_text())["exports"]) == 2  # nothing to record
    # An explicit --since before everything still never duplicates: what is there is skipped.
    assert export_parquet(db, folder, since=datetime(2000, 1, 1)).runs == 0
    assert rows(source, "SELECT count(*) FROM run_records") == query(db, "SELECT count(*) FROM run_records")


def test_files_of_an_export_that_never_committed_are_ignored_then_removed(demo: Path, tmp_path: Path) -> None:
    folder = tmp_path / "parquet"
    export_parquet(demo, folder)
    source = ParquetSource(folder)
    n = rows(source, "SELECT count(*) FROM run_records")
    real = part_files(folder, "run_records")[0]
    orphan = real.with_name("part-" + "f" * 32 + "-0.parquet")  # as if an export died before its manifest
    shutil.copy(real, orphan)
    assert rows(source, "SELECT count(*) FROM run_records") == n
    export_parquet(demo, folder, since="auto")
    assert not orphan.exists()


def test_a_running_run_waits_for_its_end(tmp_path: Path) -> None:
    db, folder = tmp_path / "store.duckdb", tmp_path / "parquet"
    with Tracing(db) as tracing:
        with tracing.run("finished") as run, run.step() as step, step.tool_call("t", {}) as call:
            call.result("x")
        with tracing.run("live") as live:
            with live.step() as step, step.tool_call("t", {}) as call:
                call.result("x")
            tracing.flush()
            report = export_parquet(db, folder)
            assert (report.runs, report.waiting) == (1, 1)
            # A run silent for STALE_AFTER (its process died) is exported as it is: incomplete.
            stale = export_parquet(db, tmp_path / "stale", stale=timedelta(0))
            assert (stale.runs, stale.waiting) == (2, 0)
            assert rows(ParquetSource(tmp_path / "stale"), "SELECT agent, status FROM runs ORDER BY 1") == [
                ("finished", "ok"), ("live", "incomplete")]
    report = export_parquet(db, folder, since="auto")
    assert (report.runs, report.waiting) == (1, 0)
    assert rows(ParquetSource(folder), "SELECT agent, status, n_steps FROM runs ORDER BY 1") == [
        ("finished", "ok", 1), ("live", "ok", 1)]


def test_what_the_export_refuses(demo: Path, tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="not a looptrace export"):
        export_parquet(demo, busy)
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    with pytest.raises(ExportError, match="not a looptrace Parquet export"):
        open_source(busy)
    with pytest.raises(ExportError, match="no such store"):
        export_parquet(tmp_path / "missing.duckdb", tmp_path / "out")
    folder = tmp_path / "newer"
    export_parquet(demo, folder)
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["schema_version"] = SCHEMA_VERSION + 1
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ExportError, match="newer looptrace"):
        with ParquetSource(folder).reader():
            pass
    assert isinstance(open_source(demo), Store)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auto", "auto"),
        ("2026-01-31", datetime(2026, 1, 31)),
        ("2026-01-31T12:00", datetime(2026, 1, 31, 12)),
        ("2026-01-31T12:00+02:00", datetime(2026, 1, 31, 10)),
        ("2026-01-31T12:00:00Z", datetime(2026, 1, 31, 12)),
    ],
)
def test_since_is_auto_or_a_utc_time(text: str, expected: object) -> None:
    assert parse_since(text) == expected


def test_since_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_since("yesterday")


def test_export_drops_has_the_documented_columns(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    Store(db).compact()
    conn = duckdb.connect(str(db), read_only=True)
    assert conn.execute("DESCRIBE export_drops").fetchall() == [
        ("run_id", "VARCHAR", "YES", None, None, None),
        ("exporter", "VARCHAR", "NO", None, None, None),
        ("dropped", "BIGINT", "NO", None, None, None),
        ("failed", "BIGINT", "NO", None, None, None),
        ("recorded_at", "TIMESTAMP", "NO", None, None, None),
    ]
    assert conn.execute("SELECT version, name FROM schema_migrations WHERE version = 3").fetchall() == [
        (3, "export_drops")]
    conn.close()
    doc = (ROOT / "docs" / "schema.md").read_text()
    assert "## `export_drops`" in doc and all(f"`{c}`" in doc for c in ("exporter", "dropped", "failed"))


# -- OTLP ------------------------------------------------------------------------------------------


class Receiver:
    """An OTLP/HTTP traces endpoint on loopback; with ``hold`` set, it answers only when released."""

    def __init__(self, *, hold: bool = False) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.release = threading.Event()
        if not hold:
            self.release.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.release.wait(60)  # held: answers when the test ends (or after a minute)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.requests.append(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self) -> Receiver:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[Any]:
        return [span for r in self.requests for rs in r.resource_spans for ss in rs.scope_spans
                for span in ss.spans]


@pytest.fixture
def dead_url() -> Iterator[str]:
    """A port bound but not listening: connections are refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@pytest.fixture
def no_otlp_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("OTEL_EXPORTER_OTLP")]:
        monkeypatch.delenv(name)


def _attrs(kvs: Any) -> dict[str, Any]:
    out = {}
    for kv in kvs:
        v = kv.value
        out[kv.key] = getattr(v, v.WhichOneof("value"))
    return out


def test_analyze_sends_evaluation_log_records_to_an_otlp_endpoint(demo: Path, exported: Path, tmp_path: Path) -> None:
    """The default: one gen_ai.evaluation.result log record per diagnosis, tied to its run's span; a
    looptrace collect (OTLP logs in) keeps them in its log_records table."""
    from looptrace.tracer.ingest.otlp import OtlpReceiver
    db = tmp_path / "collected.duckdb"
    with OtlpReceiver(db, port=0, settle=0) as receiver:
        result = looptrace("analyze", "--db", str(exported), "--otlp-endpoint", receiver.url, "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("sent 16 evaluation results (15 runs)") and "/v1/logs" in result.stderr, \
        result.stderr
    runs = {r: (t, s) for r, t, s in query(demo, "SELECT DISTINCT run_id, trace_id, span_id FROM run_records")}
    got = set()
    for trace_id, span_id, name, attributes in query(
            db, "SELECT trace_id, span_id, event_name, attributes FROM log_records"):
        a = json.loads(attributes)
        assert name == "gen_ai.evaluation.result" and a["gen_ai.evaluation.name"] == "looptrace.failure"
        assert (trace_id, span_id) == runs[a["looptrace.run.id"]]  # in the run's own span context
        got.add((a["looptrace.run.id"], a["gen_ai.evaluation.score.label"], a["gen_ai.evaluation.score.value"],
                 a.get("looptrace.evaluation.first_step"), a.get("looptrace.evaluation.last_step")))
    assert got == set(query(demo, "SELECT run_id, label, CASE WHEN is_primary THEN 1.0 ELSE 0.5 END, "
                                  "first_step, last_step FROM diagnoses"))


def test_analyze_sends_evaluation_events_to_an_otlp_endpoint(demo: Path, exported: Path) -> None:
    with Receiver() as receiver:
        result = looptrace("analyze", "--db", str(exported), "--otlp-endpoint", receiver.url, "--json",
                           "--evaluation-span-events")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("sent 16 evaluation results (15 runs)"), result.stderr
    spans = receiver.spans()
    assert len(spans) == 15
    runs = {r: (t, s) for r, t, s in query(
        demo, "SELECT DISTINCT run_id, trace_id, span_id FROM run_records")}
    got = set()
    for span in spans:
        run_id = _attrs(span.attributes)["looptrace.run.id"]
        assert span.name == f"looptrace.analyze {run_id}"
        # A child of the run's invoke_agent span: the verdict sits inside the run's own trace.
        assert (span.trace_id.hex(), span.parent_span_id.hex()) == runs[run_id]
        for event in span.events:
            assert event.name == "gen_ai.evaluation.result"
            a = _attrs(event.attributes)
            assert a["gen_ai.evaluation.name"] == "looptrace.failure" and a["gen_ai.evaluation.explanation"]
            got.add((run_id, a["gen_ai.evaluation.score.label"], a["gen_ai.evaluation.score.value"],
                     a.get("looptrace.evaluation.first_step"), a.get("looptrace.evaluation.last_step")))
    assert got == set(query(demo, "SELECT run_id, label, CASE WHEN is_primary THEN 1.0 ELSE 0.5 END, "
                                  "first_step, last_step FROM diagnoses"))


@pytest.mark.slow
def test_analyze_with_a_dead_endpoint_warns_once_and_succeeds(exported: Path, dead_url: str) -> None:
    result = looptrace("analyze", "--db", str(exported), "--otlp-endpoint", dead_url, "--json")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)) == 15
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: 15 of 15 runs") and "refused" in lines[0], lines


def _traced_run(db: Path, endpoint: str | None, steps: int = 200) -> tuple[float, str]:
    started = time.perf_counter()
    with Tracing(db, otlp_endpoint=endpoint) as tracing, tracing.run("otlp-agent", task="t") as run:
        for i in range(steps):
            with run.step("step") as step, step.tool_call("echo", {"i": i}) as call:
                call.result("ok")
    return time.perf_counter() - started, run.run_id


@pytest.mark.slow
def test_a_dead_or_hung_otlp_endpoint_does_not_slow_the_agent_and_losses_are_recorded(
    tmp_path: Path, dead_url: str, no_otlp_env: None, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401 - import cost is not the endpoint's

    # An exporter that may wait 30 s per request: an agent that waited on it would be 30 s slower,
    # so a generous 10 s bound still tells a bounded agent from a blocked one on a busy machine.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "30")

    baseline = min(_traced_run(tmp_path / f"base{i}.duckdb", None)[0] for i in range(2))
    with Receiver(hold=True) as hung:  # answers only at the end: after the exporter's timeout
        for name, url in (("dead", dead_url), ("hung", hung.url)):
            db = tmp_path / f"{name}.duckdb"
            seconds, run_id = _traced_run(db, url)
            assert seconds - baseline < 10, f"{name}: {seconds:.2f}s vs {baseline:.2f}s without OTLP"
            assert query(db, "SELECT status, n_steps FROM runs") == [("ok", 200)]  # the store has everything
            (row,) = query(db, "SELECT run_id, exporter, dropped + failed FROM export_drops")
            assert row == (run_id, f"otlp {url}/v1/traces", 401)  # the run, 200 steps, 200 tool calls


@pytest.mark.slow
def test_a_flush_waits_for_a_dead_endpoint_only_briefly(tmp_path: Path, dead_url: str, no_otlp_env: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "30")  # a flush that waited it out takes 30 s
    with Tracing(tmp_path / "store.duckdb", otlp_endpoint=dead_url) as tracing:
        with tracing.run("a") as run, run.step() as step, step.tool_call("t", {}) as call:
            call.result("x")
        started = time.perf_counter()
        assert tracing.flush() is False  # the store is flushed; the endpoint did not answer in time
        assert time.perf_counter() - started < 10
    assert query(tmp_path / "store.duckdb", "SELECT n_steps FROM runs") == [(1,)]


def test_a_store_file_from_before_export_drops_reads_without_migrating(tmp_path: Path) -> None:
    from looptrace.tracer.store.migrations import MIGRATIONS
    from looptrace.tracer.store.tables import SCHEMA_MIGRATIONS

    db = tmp_path / "v2.duckdb"
    conn = duckdb.connect(str(db))
    conn.execute(SCHEMA_MIGRATIONS)
    for version, name, step in MIGRATIONS[:2]:
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
    conn.close()  # (the views of that version were its own; a reader makes this version's in its session)
    # As a reader that finds the file busy does: no migration, yet every table is there.
    with Store(db).reader(absorb=False) as session:
        assert session.execute("SELECT count(*) FROM export_drops").fetchall() == [(0,)]


@pytest.mark.slow
def test_a_full_queue_drops_and_counts_per_run(no_otlp_env: None) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    with Receiver(hold=True) as hung:
        # The exporter would wait 60 s for the hung endpoint; shutdown must not wait for it.
        exporter = CountingSpanExporter(OTLPSpanExporter(endpoint=hung.url + "/v1/traces", timeout=60))
        processor = OtlpSpanProcessor(exporter, name="otlp test", max_queue_size=64, max_export_batch_size=32,
                                      wait_seconds=0.2)
        provider = TracerProvider(shutdown_on_exit=False)
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("test")
        for i in range(200):
            with tracer.start_as_current_span("work", attributes={"looptrace.run.id": "r1", "i": i}):
                pass
            if i == 31:  # a full batch: the exporter takes it and hangs on the endpoint
                deadline = time.monotonic() + 10
                while exporter.seen_total < 32:
                    assert time.monotonic() < deadline
                    time.sleep(0.01)
        for _ in range(10):
            with tracer.start_as_current_span("other"):
                pass
        started = time.monotonic()
        provider.shutdown()
        # Bounded by wait_seconds (0.2 s), not the exporter's 60 s: 10 s is slack for a loaded machine.
        # (`make bench` prints the hung / healthy shutdown ratio.)
        assert time.monotonic() - started < 10
    # The first batch (32) was in flight, unanswered: failed. The rest never left the queue: dropped.
    losses = [(r["run_id"], r["dropped"], r["failed"]) for r in processor.losses]
    assert losses == [(None, 10, 0), ("r1", 168, 32)]


def test_a_healthy_otlp_endpoint_gets_every_span_and_nothing_is_recorded(tmp_path: Path,
                                                                         no_otlp_env: None) -> None:
    db = tmp_path / "store.duckdb"
    with Receiver() as receiver:
        _, run_id = _traced_run(db, receiver.url, steps=20)
    assert len(receiver.spans()) == 41
    assert query(db, "SELECT count(*) FROM export_drops") == [(0,)]
    assert query(db, "SELECT count(*) FROM spans WHERE run_id = ?", [run_id]) == [(41,)]
