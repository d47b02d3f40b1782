"""The OTLP/HTTP receiver behind ``looptrace collect``: ``POST /v1/traces`` into a store's segments.

Runs and steps are derived from a whole trace (``conventions.py``), and OTLP exporters send a trace in
as many requests as their batches cut it into. So the receiver *buffers per trace*: a trace's spans
stay in memory until its root span (the one without a parent) has arrived and no span of it came for
``settle`` seconds, then the whole trace is written as one segment (its spans, runs, steps and calls).
Each trace is mapped exactly once, so nothing is ever written twice, and a span sent twice (a client
retrying after a lost response) is recognised by its id and dropped.

**Durable before acknowledged.** The memory is a cache: before a request is answered 200, its spans
that are not written with their trace already are written as they arrived to the journal table
``received_spans`` (through the sink: redacted, one fsynced segment, grouped with the requests that
arrived meanwhile; see ``journal.py``). A receiver
started on a store reads back the spans a killed one left open and finishes their traces by the same
rules, each once, as of when the journal last took a span of them (a complete trace is due at once).
Spans of written traces leave the journal after ``journal.REMEMBER`` (``prune``: at start and every
``prune_every`` seconds). When the journal cannot keep up (a slow disk: too many spans waiting) or cannot
write (a full disk), the request is answered 503 with ``Retry-After``, which OTLP clients retry; so is
one that would hold more than ``max_buffered_spans`` in memory while the store refuses writes.

**Runs while they run.** About once a second (``preview_every``) the flusher maps each open trace
that received spans since, by the same mapping, and writes the result as a preview (``live.py``): the
views show its runs (``running``) and steps until the trace's final write replaces them. Previews are
derived from the journal, so their segments are not fsynced; a catalog store gets none.

The trade-offs: a run's records are written when its trace ends (meanwhile its spans are in
``received_spans`` and its preview in the live tables); memory holds every open trace (bounded by ``max_buffered_spans``: past it, the trace idle longest is
written early); and a span that arrives after its trace was written is kept in ``spans`` only (counted
in ``late_spans``: raise ``settle`` when several processes share traces). A trace whose root never
arrives is written at shutdown, or after ``idle_timeout``, as ``incomplete``. Spans that looptrace
itself traced (``looptrace.run.id``) map span by span, so they are written at once.

A request is decoded whole before anything is kept, so a malformed body changes nothing; writes go
through the sink (redacted, then one segment), so the receiver never holds the DuckDB file. A trace
write that fails for I/O holds the trace again (it is journaled: the answer is still 200) and the
flusher retries; a value the store refuses costs only its own trace's runs and steps (``trace_writer.py``).
HTTP is ``http_handler.py``, gRPC ``grpc_service.py``: both hand decoded spans to ``ingest``.

**Log records** (``POST /v1/logs``, the gRPC LogsService) take the same road: decoded whole
(``logs_protocol.py``), held with their trace (``buffer.py``; they keep it open as its spans do),
journaled to ``received_logs`` before the answer (``log_journal.py``), taken back after a crash, and
joined to the trace's spans when it is mapped (``events.py``); every record is kept in ``log_records``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from types import TracebackType
from typing import Any, Self

from ...loopback import LoopbackServer
from ...records.spans import PlainSpan
from ...sink import Redactor, Sink
from ...store import StoreError
from ...store.backend import RowWriter, catalog_name
from .alerts import Alerts
from .buffer import Batch, Part, ReceiverStats, TraceBuffer
from .events import PlainLog
from .log_journal import LOG_JOURNAL, log_journal_rows
from .grpc_service import GrpcEndpoint
from .http_handler import TRACES_PATH, OtlpHttpHandler
from .journal import JOURNAL, GroupCommit, Overloaded, Recovered, journal_rows, prune, recover
from .live import merge, preview_rows
from .trace_writer import TraceWriter

__all__ = ["OtlpReceiver", "ReceiverStats", "TraceBuffer", "TRACES_PATH", "DEFAULT_MAX_BODY"]

log = logging.getLogger("looptrace.ingest")


class _NotWritten(OSError):
    """A group of trace writes failed (I/O): its traces are held again, and each request in it journals
    its spans as open ones (or is answered 503 when the journal cannot take them either)."""

DEFAULT_MAX_BODY = 64 << 20  # bytes of a request body, after decompression


class OtlpReceiver:
    """An OTLP/HTTP trace receiver writing into the store at ``db``. ``start()`` / ``stop()``, or ``with``.

    ``stop()`` writes every trace still buffered (those without a root as ``incomplete``) and a
    ``writer_stats`` row. ``flush()`` writes what is buffered now, complete or not. ``preview_every``:
    seconds between previews of open traces (``live.py``; None: none).
    """

    def __init__(self, db: str | os.PathLike[str], *, host: str = "127.0.0.1", port: int | None = 4318,
                 grpc_port: int | None = None,
                 max_body: int = DEFAULT_MAX_BODY, settle: float = 2.0, idle_timeout: float | None = 600.0,
                 max_buffered_spans: int = 500_000, source: str = "otlp", durable: bool = True,
                 redactor: Redactor | None = None, journal: bool = True, max_queued_spans: int = 200_000,
                 prune_every: float | None = 300.0, journal_db: str | os.PathLike[str] | None = None,
                 writer: RowWriter | None = None, preview_every: float | None = 1.0,
                 alerts: Alerts | None = None) -> None:
        self.db = os.fspath(db)
        # Where the journal lives: the store itself, or a local DuckDB file when ``db`` cannot hold it
        # (an Iceberg catalog: ``writer`` then writes traces there and closes them in that file).
        self.journal_db = os.fspath(journal_db) if journal_db is not None else self.db
        self.max_body = max_body
        self._address = (host, port)
        self._grpc_port = grpc_port
        self._grpc: GrpcEndpoint | None = None
        self._sink = Sink(self.db, redactor=redactor, durable=durable, writer=writer)
        self._journal_sink = self._sink if self.journal_db == self.db else Sink(
            self.journal_db, redactor=self._sink.redactor, durable=durable)
        # Previews of open traces (live.py): into a DuckDB store only, and not fsynced (the journal is
        # what is durable; a lost preview is replaced by the next).
        previews = preview_every is not None and writer is None and catalog_name(self.db) is None
        self._previews = Sink(self.db, redactor=self._sink.redactor, durable=False) if previews else None
        self._preview_every = preview_every or 0.0
        self.alerts = alerts if previews else None  # the rules on runs still going, read from the previews
        self._preview_due = 0.0
        self._buffer = TraceBuffer(source=source, settle=settle, idle_timeout=idle_timeout,
                                   max_buffered_spans=max_buffered_spans, previews=previews)
        self._writer = TraceWriter(self._sink, self._buffer, self.db)
        self.previews_written = 0  # trace previews written (one per open trace that changed, per round)
        # ``journal=False`` is the receiver as it was, answering from memory: for the benchmark only.
        self._journal = GroupCommit(self._journal_write, max_queued=max_queued_spans) if journal else None
        self._log_journal = GroupCommit(self._log_journal_write, max_queued=max_queued_spans) if journal else None
        # Traces a request completes are written before it is answered, by group commit (``_write_due``);
        # never refused for load (a taken trace must be written or held again).
        self._traces = GroupCommit(self._write_parts, max_queued=sys.maxsize)
        self._max_buffered = max_buffered_spans
        # Spans of written traces leave the journal (past its memory window) at start and this often.
        self._prune_every = prune_every if journal else None
        self._pruned_at = 0.0
        self.pruned_spans = 0
        # A catalog commit takes from a few hundred ms to seconds and races other receivers' commits:
        # in the request path, under the lock, every request waited for every other's commits and
        # clients timed out. A journaled catalog receiver answers once a request is journaled, and
        # its flusher writes what is due in batches, outside the lock (one commit for many traces).
        self._batched = journal and (writer is not None or catalog_name(self.db) is not None)
        self._writing = threading.Lock()  # one batch write at a time (the flusher's, flush())
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._closed = False  # the final flush is done: later requests are refused with 503
        self._http: LoopbackServer | None = None
        self._threads: list[threading.Thread] = []

    @property
    def stats(self) -> ReceiverStats:
        return self._buffer.stats

    @property
    def unwritten_spans(self) -> int:
        """Spans received but not in the store (after ``stop()``: lost)."""
        return self._buffer.buffered_spans

    @property
    def port(self) -> int:
        if self._http is None:
            raise RuntimeError("the receiver is not running; call start() first")
        return int(self._http.server_port)

    @property
    def url(self) -> str:
        return f"http://{self._address[0]}:{self.port}{TRACES_PATH}"

    @property
    def serves_grpc(self) -> bool:
        return self._grpc is not None

    @property
    def grpc_url(self) -> str:
        """The OTLP/gRPC endpoint (an exporter's ``endpoint``), when gRPC was asked for."""
        if self._grpc is None:
            raise RuntimeError("the receiver serves no gRPC; give grpc_port and call start()")
        return self._grpc.url

    def start(self) -> Self:
        """Take back what a receiver killed on this store left open, then listen. A store that cannot
        be read now is no reason to refuse spans: its journal stays, for the next start to take back."""
        if self._threads or self._stopped.is_set():
            raise RuntimeError("an OtlpReceiver can be started once")
        if self._journal is not None:
            try:
                left = recover(self.journal_db)
            except (StoreError, OSError) as exc:
                log.warning("looptrace collect: could not read the open traces back from %s: %s",
                            self.journal_db, exc)
                left = Recovered()
            with self._lock:
                ages = left.ages(datetime.now(timezone.utc).replace(tzinfo=None))
                self._buffer.restore(left.spans, left.written, time.monotonic(), ages, left.logs,
                                     left.written_logs)
            if left.spans or left.logs:
                log.warning("looptrace collect: %d spans and %d log records of %d open traces taken back "
                            "from the journal", len(left.spans), len(left.logs),
                            len({s.trace_id for s in left.spans} | {r.trace_id for r in left.logs}))
            self._prune()
        if self._grpc_port is not None:
            self._grpc = GrpcEndpoint(self.ingest, self._rejected, lambda: self.stats.last_error,
                                      host=self._address[0], port=self._grpc_port, max_body=self.max_body,
                                      ingest_logs=self.ingest_logs)
        flusher = threading.Thread(target=self._flush_loop, name="looptrace-otlp-flusher", daemon=True)
        self._threads = [flusher]
        if self._address[1] is not None:
            try:
                self._http = LoopbackServer(self._address, OtlpHttpHandler, owner=self)
            except OSError:
                if self._grpc is not None:
                    self._grpc.stop(0)
                raise
            self._threads.append(threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                                                  name="looptrace-otlp-receiver", daemon=True))
        if self._grpc is not None:
            self._grpc.start()
        for t in self._threads:
            t.start()
        return self

    def flush(self, *, everything: bool = True) -> bool:
        """Write what is due (with ``everything``, all buffered traces); False if the write failed."""
        if self._batched:
            return self._write_batch(everything=everything)
        with self._lock:
            return self._writer.write(self._buffer.take(time.monotonic(), everything=everything))

    def _write_batch(self, *, everything: bool = False) -> bool:
        """Take what is due under the lock and write it outside it: requests keep being journaled and
        answered meanwhile (spans of a trace in flight are placed under it once written, buffer.done)."""
        with self._writing:
            with self._lock:
                batch = self._buffer.take(time.monotonic(), everything=everything)
            return self._writer.write(batch, guard=self._lock) if batch.parts else True

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        if self._grpc is not None:
            self._grpc.stop()
        if self._http is not None:
            self._http.close()
        for t in self._threads:
            t.join()
        with self._lock:
            ok = self._writer.write(self._buffer.take(time.monotonic(), everything=True))
            self._closed = True
            if not ok:
                log.warning("looptrace collect: %d buffered spans could not be written to %s: %s",
                            self._buffer.buffered_spans, self.db, self.stats.last_error)
            self._writer.write_stats()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- called with the lock held, or from request threads -------------------------------------------

    @property
    def journal_commits(self) -> int:
        """Journal writes made (fewer than requests when concurrent ones were grouped)."""
        return self._journal.commits if self._journal is not None else 0

    def _journal_write(self, spans: list[PlainSpan]) -> None:
        self._journal_sink.write({JOURNAL: journal_rows(spans, datetime.now(timezone.utc).replace(tzinfo=None))})

    def _log_journal_write(self, logs: list[PlainLog]) -> None:
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        self._journal_sink.write({LOG_JOURNAL: log_journal_rows(logs, now)})

    def ingest_logs(self, logs: Sequence[PlainLog]) -> bool:
        """Hold a decoded logs request with its traces (``ingest``'s rules): True once every record is
        durable (journaled, or written: a record of no trace, or of a written one, is written at once)."""
        with self._lock:
            self.stats.requests += 1
            if self._closed:
                self.stats.last_error = "the receiver is shutting down"
                return False
            now = time.monotonic()
            traces = self._buffer.add_logs(logs, now)
            due = None if self._batched else self._buffer.take(now, only=traces)
            held = self._buffer.held_logs(logs) if self._log_journal is not None else []
        written = due is None or self._write_due(due)
        if not written:
            with self._lock:  # held again (``put_back``): then the journal keeps them, as any open record
                held = self._buffer.held_logs(logs) if self._log_journal is not None else []
        return self._journaled(self._log_journal, held, written, "log records")

    def _write_due(self, batch: Batch) -> bool:
        """Write what a request made due, outside the lock: requests that complete traces while a write
        is under way wait and go together in the next one (one segment, one fsync for all of them), and
        the others are decoded and buffered meanwhile. Spans of a trace in flight that arrive during its
        write are held as a new open trace and placed under it once written (``buffer.done``)."""
        if batch.parts:
            try:
                self._traces.commit(batch.parts)
            except _NotWritten:
                return False
        return True

    def _write_parts(self, parts: list[Part]) -> None:
        if not self._writer.write(Batch(parts), guard=self._lock):
            raise _NotWritten(self.stats.last_error or "the trace write failed")

    def ingest(self, spans: Sequence[PlainSpan]) -> bool:
        """Buffer a decoded request, write what is due, and journal what is still only in memory. True
        once every span is durable (in its written trace, or in the journal); False when they could
        not be kept (answer 503: the client retries, and a span held meanwhile is dropped as a resend)."""
        with self._lock:
            self.stats.requests += 1
            if self._closed:
                self.stats.last_error = "the receiver is shutting down"
                return False
            if self._buffer.buffered_spans + len(spans) > 2 * self._max_buffered and self.stats.write_errors:
                # Trace writes fail and memory is full: hold no more until the store takes writes again.
                return False
            now = time.monotonic()
            traces = self._buffer.add(spans, now)
            due = None if self._batched else self._buffer.take(now, only=traces)
            # A request that completes its traces (settle 0, looptrace's own spans, late spans) is
            # durable by the trace write itself: only what is still held needs the journal.
            held = self._buffer.held(spans) if self._journal is not None else []
        written = due is None or self._write_due(due)
        if not written:
            with self._lock:  # held again (``put_back``): then the journal keeps them, as any open span
                held = self._buffer.held(spans) if self._journal is not None else []
        return self._journaled(self._journal, held, written, "spans")

    def _journaled(self, journal: GroupCommit | None, held: Sequence[Any], written: bool, what: str) -> bool:
        """Journal what a request left only in memory (spans or log records); True once it is durable."""
        if not held:
            return written
        assert journal is not None
        try:
            journal.commit(held)
        except (OSError, Overloaded) as exc:
            with self._lock:
                self._buffer.stats.last_error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, OSError):
                    self._buffer.stats.write_errors += 1
            return False
        except Exception as exc:  # noqa: BLE001 - a value the journal refuses: held as before it existed
            log.warning("looptrace collect: could not journal %d %s (%s: %s); they are kept once "
                        "their trace is written", len(held), what, type(exc).__name__, exc)
            return written
        return True

    def _rejected(self) -> None:
        with self._lock:
            self.stats.rejected += 1

    def _flush_loop(self) -> None:
        interval = min(0.25, max(0.05, self._buffer.settle / 4))
        while not self._stopped.wait(interval):
            if self._batched:
                self._write_batch()
            else:
                with self._lock:
                    self._writer.write(self._buffer.take(time.monotonic()))
            if self._previews is not None and time.monotonic() >= self._preview_due:
                self._preview()
            if self._prune_every is not None and time.monotonic() - self._pruned_at >= self._prune_every:
                self._prune()

    def _preview(self) -> None:
        """Write a preview of each open trace that received spans since its last one, as one segment.
        Mapped outside the lock (requests are not held up); the next round waits at least ten times
        as long as this one's mapping took, so previews of huge traces take at most a tenth of a core.
        Nothing here may stop the flusher, which writes the traces themselves."""
        assert self._previews is not None
        started = mapped = time.monotonic()
        traces: list[tuple[str, list[PlainSpan]]] = []
        try:
            with self._lock:
                revision = time.time_ns()  # taken under the lock: a later final write outranks it (live.py)
                traces = self._buffer.previews()
            if traces:
                mapped_rows = [(tid, self._buffer.rows_of(spans)) for tid, spans in traces]
                if self.alerts is not None:
                    for _, trace_rows in mapped_rows:
                        self.alerts.check(trace_rows)  # queues hooks; never raises, never runs one here
                rows = merge(preview_rows(tid, trace_rows, revision) for tid, trace_rows in mapped_rows)
                mapped = time.monotonic()
                self._previews.write(rows)
                self.previews_written += len(traces)
        except Exception as exc:  # noqa: BLE001 - a preview is a convenience: the trace is journaled
            log.warning("looptrace collect: could not write previews of %d open traces: %s", len(traces), exc)
        self._preview_due = time.monotonic() + max(self._preview_every, 10 * (mapped - started))

    def _prune(self) -> None:
        """Drop the journal rows of traces written long enough ago (``journal.prune``); a busy or
        unwritable store file only postpones it. Never under the lock: requests are not held up."""
        self._pruned_at = time.monotonic()
        if self._prune_every is None:
            return
        try:
            self.pruned_spans += prune(self.journal_db) or 0
        except Exception as exc:  # noqa: BLE001 - pruning is housekeeping: the journal is only kept longer
            log.warning("looptrace collect: could not prune the journal of %s: %s", self.journal_db, exc)
