"""The receiver's journal (issue 24): spans durable before the answer, taken back once after a crash,
group-committed across concurrent requests, and OTLP/gRPC through the same path.

The crash here is a receiver that is never stopped (its memory is simply dropped, as ``kill -9`` drops
it); ``test_collect_kill.py`` kills a real ``collect`` process with SIGKILL.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.sdk.trace.export import SpanExportResult

from looptrace.tracer.ingest.otlp import OtlpReceiver, TraceBuffer
from looptrace.tracer.ingest.otlp.journal import GroupCommit, Overloaded, prune, recover
from looptrace.tracer.ingest.otlp.protocol import spans_of
from looptrace.tracer.records.spans import PlainSpan

from .conftest import query
from .test_ingest import finished_spans, genai_agent, provider, request_of


def _open_trace() -> list[PlainSpan]:
    """A GenAI agent's trace whose root span has not ended: 3 spans, 2 steps."""
    return spans_of(request_of(lambda t: genai_agent(t, repeats=1, end_root=False)))


def test_journal_rows_read_back_as_the_same_spans(db: Path) -> None:
    spans = _open_trace()
    spans[0].attributes = {**spans[0].attributes, "list": [1, "a", None], "map": {"k": 2.5}}
    with OtlpReceiver(db, port=None, settle=60) as receiver:
        assert receiver.ingest(spans)
        left = recover(str(db))  # while it runs: every span is open, none written yet
    assert sorted(left.spans, key=lambda s: s.span_id) == sorted(spans, key=lambda s: s.span_id)


def test_a_crashed_receivers_open_trace_is_finished_once_by_the_next(db: Path) -> None:
    spans = _open_trace()
    crashed = OtlpReceiver(db, port=None, settle=0.5)  # never started or stopped: dropped like a kill -9
    assert crashed.ingest(spans[:1]) and crashed.ingest(spans[1:])
    assert crashed.stats.spans_written == 0  # the root is open: nothing mapped, all of it only journaled
    # Visible while the trace is open, before it is mapped (and so are its times).
    assert query(db, "SELECT count(*), count(DISTINCT span_id), min(start_time) > TIMESTAMP '2020-01-01', "
                     "count(*) FILTER (received_at IS NULL) FROM open_spans") == [(3, 3, True, 0)]
    with OtlpReceiver(db, port=None, settle=0.5) as second:
        assert second.stats.recovered_spans == len(spans)
        assert second.ingest(spans[:2])  # the client retries a request whose answer the crash swallowed
    assert second.stats.duplicate_spans == 2
    assert query(db, "SELECT count(*), count(DISTINCT span_id) FROM spans") == [(3, 3)]
    assert query(db, "SELECT agent, status, n_steps FROM runs") == [("ingest-test", "incomplete", 2)]
    assert query(db, "SELECT count(*) FROM open_spans") == [(0,)]  # written: no longer open
    with OtlpReceiver(db, port=None) as third:  # nothing left open: nothing taken back, nothing written
        assert third.stats.recovered_spans == 0
        assert third.ingest(spans[:2])  # a late retry of spans already written is dropped, not stored again
    assert third.stats.duplicate_spans == 2
    assert query(db, "SELECT count(*), count(DISTINCT span_id) FROM spans") == [(3, 3)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


def test_taken_back_traces_keep_their_age_so_settle_and_idle_timeout_run_from_the_journal(db: Path) -> None:
    """A trace taken back is held as of when the journal last took a span of it, not as of the restart:
    restarted more often than ``idle_timeout``, a receiver used to hold a rootless trace for ever, and a
    complete trace waited a whole ``settle`` again after each restart."""
    complete = spans_of(request_of(lambda t: genai_agent(t, repeats=1)))
    rootless = _open_trace()
    crashed = OtlpReceiver(db, port=None, settle=60)  # journals both, writes nothing: then "killed"
    assert crashed.ingest(complete) and crashed.ingest(rootless)
    left = recover(str(db))
    assert set(left.last_received) == {complete[0].trace_id, rootless[0].trace_id}
    ages = left.ages(max(left.last_received.values()))
    assert all(0 <= age < 60 for age in ages.values())
    # As if the receiver restarted 700 s after the journal took them (settle 2 s, idle timeout 600 s).
    buffer = TraceBuffer(settle=2.0, idle_timeout=600.0)
    buffer.restore(left.spans, left.written, 1000.0, {t: age + 700 for t, age in ages.items()})
    due = {part.trace_id: part.held.has_root for part in buffer.take(1000.0).parts if part.held}
    assert due == {complete[0].trace_id: True, rootless[0].trace_id: False}  # settled; idle: incomplete
    # Restarted at once: the complete trace waits out the rest of its settle, nothing is due yet.
    again = TraceBuffer(settle=2.0, idle_timeout=600.0)
    again.restore(left.spans, left.written, 1000.0, {t: 0.5 for t in ages})
    assert again.take(1000.0).parts == [] and again.buffered_spans == len(left.spans)
    assert [p.trace_id for p in again.take(1001.6).parts] == [complete[0].trace_id]


def test_the_journal_drops_written_spans_past_its_memory_and_keeps_what_a_restart_needs(db: Path) -> None:
    done = spans_of(request_of(lambda t: genai_agent(t, repeats=2)))
    root = [s for s in done if not s.parent_span_id]
    children = [s for s in done if s.parent_span_id]
    still_open = _open_trace()
    crashed = OtlpReceiver(db, port=None, settle=0)  # never stopped: what it holds is dropped, as by kill -9
    assert crashed.ingest(children) and crashed.ingest(still_open)  # no root yet: journaled
    assert crashed.ingest(root)  # completes `done`: written to spans at once (settle 0)
    journal = "SELECT count(*), count(*) FILTER (trace_id = ?) FROM received_spans"
    assert query(db, journal, [still_open[0].trace_id]) == [(len(children) + 3, 3)]
    assert prune(str(db)) == 0  # written a moment ago: kept, a restart still knows its span ids
    assert prune(str(db), remember=timedelta(0)) == len(children)  # past the window: the written ones go
    assert query(db, journal, [still_open[0].trace_id]) == [(3, 3)]  # the open trace's spans stay
    with OtlpReceiver(db, port=None, settle=0) as restarted:
        assert restarted.stats.recovered_spans == 3
    # `done`: 2 tool steps and the answer; the open one: its 1 tool step and the chat before it.
    assert query(db, "SELECT status, n_steps FROM runs ORDER BY status") == [("incomplete", 2), ("ok", 3)]
    assert query(db, "SELECT count(*) - count(DISTINCT span_id) FROM spans") == [(0,)]
    assert query(db, "SELECT count(*) FROM open_spans") == [(0,)]


def test_concurrent_requests_share_journal_writes() -> None:
    written: list[int] = []

    def slow_write(spans: list[PlainSpan]) -> None:
        time.sleep(0.05)  # a disk's fsync: requests arriving meanwhile wait for the next write
        written.append(len(spans))

    commit = GroupCommit(slow_write)
    span = _open_trace()[:1]
    threads = [threading.Thread(target=commit.commit, args=(span,)) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(written) == 40 and commit.commits == len(written) < 40
    print(f"40 requests, {commit.commits} journal writes")


def test_a_failing_journal_fails_every_request_of_its_write_and_a_full_queue_refuses_at_once() -> None:
    gate = threading.Event()

    def write(spans: list[PlainSpan]) -> None:
        gate.wait(30)
        raise OSError(28, "No space left on device")

    commit = GroupCommit(write, max_queued=3)
    span = _open_trace()[:2]
    errors: list[BaseException] = []

    def send() -> None:
        try:
            commit.commit(span)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    first = threading.Thread(target=send)
    first.start()
    while commit._writing is False:  # the first request's write is under way (and stuck)
        time.sleep(0.01)
    second = threading.Thread(target=send)
    second.start()
    while commit._queued < 2:
        time.sleep(0.01)
    with pytest.raises(Overloaded):  # 2 waiting + 2 more is over the bound of 3: refused, not queued
        commit.commit(span)
    gate.set()
    first.join()
    second.join()
    assert [type(e) for e in errors] == [OSError, OSError]


def test_otlp_grpc_with_the_real_exporter_and_unavailable_with_a_retry_hint(db: Path) -> None:
    obstacle = Path(f"{db}.segments")
    with OtlpReceiver(db, port=None, grpc_port=0, settle=0) as receiver:
        exporter = GrpcExporter(endpoint=receiver.grpc_url, insecure=True, timeout=30)
        tracer_provider, tracer = provider(exporter)
        genai_agent(tracer)
        tracer_provider.shutdown()
        assert query(db, "SELECT agent, status, n_steps FROM runs") == [("fixer", "ok", 7)]
        moved = obstacle.rename(f"{db}.segments-moved")
        # A link to a file where the segments folder goes: every segment write fails. A link, so that the folder
        # comes back in one atomic replace below, where the receiver's retry could otherwise make a new folder
        # between an unlink and a rename.
        Path(f"{db}.not-a-folder").write_text("a file where the segments folder goes")
        obstacle.symlink_to(Path(f"{db}.not-a-folder"))
        stub = trace_service_pb2_grpc.TraceServiceStub(grpc.insecure_channel(receiver.grpc_url.split("//")[1]))
        request = request_of(genai_agent)
        with pytest.raises(grpc.RpcError) as refused:
            stub.Export(request, timeout=30)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        hint = RetryInfo.FromString(dict(refused.value.trailing_metadata())["google.rpc.retryinfo-bin"])
        assert hint.retry_delay.seconds == 1
        Path(f"{db}.segments-back").symlink_to(moved, target_is_directory=True)
        Path(f"{db}.segments-back").replace(obstacle)
        exporter = GrpcExporter(endpoint=receiver.grpc_url, insecure=True, timeout=30)
        assert exporter.export(finished_spans(lambda t: genai_agent(t, repeats=2))) is SpanExportResult.SUCCESS
        stub.Export(request, timeout=30)  # the refused request, retried: stored once, not twice
    # The refused request's trace was held in memory meanwhile and written once the store was back.
    assert query(db, "SELECT count(*), count(*) FILTER (status = 'ok') FROM runs") == [(3, 3)]
    assert query(db, "SELECT count(*) - count(DISTINCT span_id) FROM spans") == [(0,)]
