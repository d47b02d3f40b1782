"""The receiver's journal: every acknowledged span is durable before ``collect`` answers 200.

OTLP clients never resend what was answered 200, and a trace is mapped to runs and steps only once it
ends, so an open trace must not live in memory alone. Each request's spans are written, as they
arrived, to ``received_spans`` through the sink (redacted, one fsynced segment) before the answer; the
receiver's memory is a cache of that table. A span is *open* while its ``(trace_id, span_id)`` is not in
``spans``: writing the trace (or a late span) closes it, in the same atomic segment that holds its rows.
After a crash the next receiver reads the open spans back (``recover``) and finishes their traces by
the usual rules, each exactly once; it also remembers what was written recently, so a client retrying
a request whose answer the crash swallowed adds nothing twice.

The journal does not grow for ever: ``prune`` deletes the rows of spans already in ``spans`` once they
are older than ``REMEMBER`` (the window the memory of written ids is read from), from the DuckDB file
(segments are append-only); rows of open traces stay until their trace is written.

Writes are *group commits*: requests arriving while a journal write is under way wait, and the next
write takes all of them as one segment, so concurrent exporters share one fsync (``GroupCommit``).
Waiting requests are bounded: past ``max_queued`` spans a request is refused at once (503 with a
retry hint), which is how a slow or full disk becomes back-pressure instead of memory.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ...records.spans import PlainSpan
from ...records.text import to_json
from ...store import Store, StoreError
from ...store.store import is_lock_error
from ...store.tables import LIVE_TABLES
from .events import PlainLog
from .log_journal import PRUNE_LOGS_SQL, read_open_logs

__all__ = ["JOURNAL", "REMEMBER", "GroupCommit", "Overloaded", "Recovered", "journal_rows", "spans_of_rows", "recover",
           "open_traces", "prune"]

JOURNAL = "received_spans"

# Spans journaled and not yet in `spans`: the traces a receiver left open. One row per span (a client
# retrying after a lost answer may have journaled it twice).
OPEN_SPANS_SQL = """
SELECT r.* EXCLUDE (received_at)
FROM received_spans r ANTI JOIN spans s USING (trace_id, span_id)
QUALIFY row_number() OVER (PARTITION BY r.trace_id, r.span_id ORDER BY r.received_at) = 1
ORDER BY r.received_at
"""

# When each open trace last received a span: a trace taken back keeps its age, so the settle and idle
# rules run from what was durable, not from the restart (restarted often, an orphan never timed out).
OPEN_TRACES_SQL = """
SELECT r.trace_id, max(r.received_at)
FROM received_spans r ANTI JOIN spans s USING (trace_id, span_id)
GROUP BY r.trace_id
"""

# Spans of traces written lately (journaled since ?), with the run each was mapped to: the memory a
# receiver needs to drop a retried span instead of storing it twice. Bounded by LIMIT ?.
WRITTEN_SPANS_SQL = """
SELECT s.trace_id, s.span_id, s.run_id
FROM spans s SEMI JOIN (SELECT DISTINCT trace_id FROM received_spans WHERE received_at >= ?) r USING (trace_id)
LIMIT ?
"""


# Closed journal rows (their span is in `spans`) received before ? : deleted by ``prune``. Rows of open
# traces are never deleted, and closed ones stay for ``REMEMBER`` (what WRITTEN_SPANS_SQL reads back).
PRUNE_SQL = """
DELETE FROM received_spans r
WHERE r.received_at < ?
  AND EXISTS (SELECT 1 FROM spans s WHERE s.trace_id = r.trace_id AND s.span_id = r.span_id)
"""

# Previews (live.py) no view shows any more: every revision of a trace but its latest, and all of a
# written trace's. The row closing a written trace stays for ``REMEMBER`` (revisions are ns of wall
# clock; ? is the cutoff), so a preview segment that lands late is still hidden; then it goes too.
PRUNE_PREVIEWS_SQL = tuple(f"""
DELETE FROM {live} p
WHERE NOT EXISTS (SELECT 1 FROM (
    SELECT trace_id, revision FROM live_traces
    QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY revision DESC) = 1 AND open
) c WHERE c.trace_id = p.live_trace_id AND c.revision = p.live_revision)
""" for live in LIVE_TABLES.values()) + ("""
DELETE FROM live_traces t
WHERE t.revision < (SELECT max(revision) FROM live_traces u WHERE u.trace_id = t.trace_id)
   OR (NOT t.open AND t.revision < ?)
""",)

# How long the spans of a written trace stay in the journal: a restarted receiver reads back the ids of
# traces journaled this recently, so a client retrying a request whose answer a crash swallowed (or
# sending a late span) is dropped or placed rather than stored twice.
REMEMBER = timedelta(minutes=15)


class Overloaded(Exception):
    """More spans wait for the journal than ``max_queued``: refuse now, the client retries later."""


def journal_rows(spans: Sequence[PlainSpan], received_at: datetime) -> dict[str, list[Any]]:
    """``spans`` as columns of ``received_spans``: every field kept, so ``spans_of_rows`` gives them back."""
    return {
        "trace_id": [s.trace_id for s in spans],
        "span_id": [s.span_id for s in spans],
        "parent_span_id": [s.parent_span_id for s in spans],
        "name": [s.name for s in spans],
        "kind": [s.kind for s in spans],
        "start_ns": [s.start_ns for s in spans],
        "end_ns": [s.end_ns for s in spans],
        "status_code": [s.status_code for s in spans],
        "status_message": [s.status_message for s in spans],
        "attributes": [to_json(dict(s.attributes)) if s.attributes else None for s in spans],
        "events": [to_json(list(s.events)) if s.events else None for s in spans],
        "resource": [to_json(dict(s.resource)) if s.resource else None for s in spans],
        "scope": [s.scope for s in spans],
        "received_at": [received_at] * len(spans),
    }


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


def spans_of_rows(rows: Iterable[Sequence[Any]]) -> list[PlainSpan]:
    """Rows of ``OPEN_SPANS_SQL`` (the journal's columns but ``received_at``) as spans again."""
    return [PlainSpan(trace_id=r[0], span_id=r[1], parent_span_id=r[2], name=r[3], kind=r[4] or "INTERNAL",
                      start_ns=r[5], end_ns=r[6], status_code=r[7] or "UNSET", status_message=r[8],
                      attributes=_loads(r[9]) or {}, events=_loads(r[10]) or [], resource=_loads(r[11]) or {},
                      scope=r[12])
            for r in rows]


@dataclass
class Recovered:
    """What a crashed receiver left: its open spans, recently written (trace, span, run) ids, and when
    each open trace last received a span (UTC, naive, as ``received_at``)."""

    spans: list[PlainSpan] = field(default_factory=list)
    written: list[tuple[str, str, str | None]] = field(default_factory=list)
    last_received: dict[str, datetime] = field(default_factory=dict)
    logs: list[PlainLog] = field(default_factory=list)  # open log records (log_journal.py)
    written_logs: list[str] = field(default_factory=list)

    def ages(self, now: datetime) -> dict[str, float]:
        """Seconds since each open trace last received a span, as of ``now`` (never negative)."""
        return {t: max(0.0, (now - at).total_seconds()) for t, at in self.last_received.items()}


def recover(db: str, *, remember: timedelta = REMEMBER, limit: int = 1_000_000) -> Recovered:
    """Read the open spans and the recent memory back from the store at ``db`` (nothing if it is new)."""
    store = Store(db)
    if not store.path.exists() and not store.segments_dir.exists():
        return Recovered()
    since = datetime.now(timezone.utc).replace(tzinfo=None) - remember
    with store.reader(locked_down=False) as conn:
        spans = spans_of_rows(conn.execute(OPEN_SPANS_SQL).fetchall())
        written = [(t, s, r) for t, s, r in conn.execute(WRITTEN_SPANS_SQL, [since, limit]).fetchall()]
        last = {t: at for t, at in conn.execute(OPEN_TRACES_SQL).fetchall()} if spans else {}
        logs, log_last, written_logs = read_open_logs(conn, since, limit)
    for trace_id, at in log_last.items():
        last[trace_id] = max(at, last.get(trace_id, at))
    return Recovered(spans, written, last, logs, written_logs)


def open_traces(db: str, *, strict: bool = False) -> set[str]:
    """The ids of the traces the journal at ``db`` holds open (empty when it cannot be read now: the
    receiver that takes them back reports that; with ``strict``, an ``OSError`` saying why, for a
    caller that must not take "cannot read" for "none open")."""
    store = Store(db)
    if not store.path.exists() and not store.segments_dir.exists():
        return set()
    try:
        with store.reader(locked_down=False) as conn:
            return {t for t, _ in conn.execute(OPEN_TRACES_SQL).fetchall()}
    except (StoreError, OSError) as exc:
        if strict:
            raise OSError(f"the journal {db} cannot be read now: {exc}") from exc
        return set()


def prune(db: str, *, remember: timedelta = REMEMBER, wait: float = 0.0) -> int | None:
    """Delete the journal rows of spans already written to ``spans`` and received over ``remember``
    ago, and the previews no view shows (``PRUNE_PREVIEWS_SQL``); how many journal rows, or None when
    the store file is busy (another process holds it: try again later).

    Segments are append-only, so rows leave the journal only from the DuckDB file: this opens it for
    writing (absorbing pending segments first, so every written trace is seen) for one DELETE. What a
    restart needs is kept: every open span (``recover`` finishes their traces) and, for ``remember``,
    the ids of traces written lately (a retried span is dropped, not stored twice)."""
    store = Store(db)
    if not store.path.exists() and not store.segments_dir.exists():
        return 0
    before = datetime.now(timezone.utc).replace(tzinfo=None) - remember
    try:
        with store.writer(wait=wait) as conn:
            row = conn.execute(PRUNE_SQL, [before]).fetchone()
            conn.execute(PRUNE_LOGS_SQL, [before])
            cutoff = time.time_ns() - int(remember.total_seconds() * 1e9)
            for sql in PRUNE_PREVIEWS_SQL:
                conn.execute(sql, [cutoff] if "?" in sql else [])
    except StoreError as exc:
        if isinstance(exc.__cause__, Exception) and is_lock_error(exc.__cause__):
            return None
        raise
    return int(row[0]) if row else 0


class _Ticket:
    __slots__ = ("spans", "done", "error")

    def __init__(self, spans: Sequence[Any]) -> None:
        self.spans = spans
        self.done = False
        self.error: BaseException | None = None


class GroupCommit:
    """Leader/follower group commit: a request's spans are written with those of every request that
    waited alongside it, as one call of ``write``. ``commit`` returns once its spans are written, or
    raises what the write raised (or ``Overloaded`` without waiting). Thread-safe."""

    def __init__(self, write: Callable[[list[Any]], object], *, max_queued: int = 200_000) -> None:
        self._write = write
        self.max_queued = max_queued
        self._cond = threading.Condition()
        self._queue: list[_Ticket] = []
        self._queued = 0
        self._writing = False
        self.commits = 0  # writes made: fewer than requests when they were grouped

    def commit(self, spans: Sequence[Any]) -> None:
        if not spans:
            return
        ticket = _Ticket(spans)
        with self._cond:
            if self._queued and self._queued + len(spans) > self.max_queued:
                raise Overloaded(f"{self._queued} spans are waiting to be written; try again shortly")
            self._queue.append(ticket)
            self._queued += len(spans)
            while not ticket.done:
                if self._writing:  # a leader is writing: ours goes with the next write (or is in this one)
                    self._cond.wait()
                    continue
                batch, self._queue = self._queue, []
                self._queued -= sum(len(t.spans) for t in batch)
                self._writing = True
                self._cond.release()
                try:
                    self._commit(batch)
                finally:
                    self._cond.acquire()
                    self._writing = False
                    for t in batch:
                        t.done = True
                    self._cond.notify_all()
        if ticket.error is not None:
            raise ticket.error

    def _commit(self, batch: list[_Ticket]) -> None:
        """One write for the whole batch. An I/O error is every request's; a value the store refuses
        (bad data) is found by writing request by request, so it fails only its own request."""
        try:
            self.commits += 1
            self._write([s for t in batch for s in t.spans])
            return
        except Exception as exc:  # noqa: BLE001 - handed to the requests below
            if isinstance(exc, OSError) or len(batch) == 1:
                for t in batch:
                    t.error = exc
                return
        for t in batch:
            try:
                self.commits += 1
                self._write(list(t.spans))
            except Exception as exc:  # noqa: BLE001
                t.error = exc
