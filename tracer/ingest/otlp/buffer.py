"""Holding spans per trace until the trace is complete, then mapping it once (see receiver.py).

A trace's spans stay here until its root span has arrived and no span of it came for ``settle``
seconds; a loose model call (a trace of one call of a bare SDK loop, see conversations.py) stays until no
loose call came for ``conversation_settle`` seconds, so that the calls of one loop are mapped as one run.
Each trace is mapped exactly once, span ids of written traces are remembered so resent
spans are dropped and late ones are placed under their run. Log records tied to a trace (GenAI events,
``events.py``) are held with it, keep it open as its spans do (so a trace is written once its records
too have had ``settle`` seconds to come), and are joined to its spans when it is mapped; a record of no
trace is written at once, one of a written trace as ``late``. Pure bookkeeping: no I/O, no HTTP.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from ...records.spans import PlainSpan
from .conventions import is_native
from .conversations import group_conversations
from .events import LATE, PlainLog, join, log_rows
from .live import closing_rows
from .parts import Batch, OpenTrace, Part
from .stats import ReceiverStats
from .trace_rows import loose, spans_only, trace_rows

# Batch, Part, ReceiverStats and spans_only live in parts.py, stats.py and trace_rows.py; named here too,
# where the receiver and ``looptrace collect`` have always imported them.
__all__ = ["ReceiverStats", "TraceBuffer", "Batch", "Part", "REMEMBERED_SPANS", "spans_only"]

log = logging.getLogger("looptrace.ingest")

REMEMBERED_SPANS = 1_000_000  # span ids of written traces kept to drop resent spans and place late ones


class TraceBuffer:
    """Open traces and the memory of written ones; not thread-safe (the receiver locks around it)."""

    def __init__(self, *, source: str = "otlp", settle: float = 2.0, idle_timeout: float | None = 600.0,
                 max_buffered_spans: int = 500_000, conversation_settle: float = 30.0,
                 previews: bool = True) -> None:
        self.source, self.settle, self.idle_timeout = source, settle, idle_timeout
        self.previewing = previews  # open traces are previewed (live.py): their final writes close them
        self.conversation_settle = conversation_settle
        self._loose: dict[str, OpenTrace] = {}  # settled loose model calls, waiting for the rest of their loop
        self.max_buffered_spans = max_buffered_spans
        self.stats = ReceiverStats()
        self._open: dict[str, OpenTrace] = {}
        self._buffered = 0
        self._written: OrderedDict[str, dict[str, str | None]] = OrderedDict()  # trace -> span id -> run id
        self._remembered = 0
        self._native: set[str] = set()
        self._direct: list[tuple[str, list[PlainSpan]]] = []  # spans to write now, not to buffer
        self._direct_logs: list[PlainLog] = []  # records of no trace, or of a written one: written now
        self._written_logs: OrderedDict[str, None] = OrderedDict()  # ids of records written lately
        self._log_seq = 0
        self._in_flight: set[str] = set()  # traces taken and being written (outside the receiver's lock)
        self._in_flight_logs: set[str] = set()  # ids of records taken and being written

    @property
    def buffered_spans(self) -> int:
        """Spans held and not yet written (open traces, and spans queued to be written at once)."""
        return self._buffered + sum(len(spans) for _, spans in self._direct)

    def add(self, spans: Sequence[PlainSpan], now: float) -> set[str]:
        """Hold ``spans`` (or queue them to be written now); return the ids of the traces they belong to."""
        self.stats.spans_received += len(spans)
        by_trace: dict[str, list[PlainSpan]] = {}
        for s in spans:
            by_trace.setdefault(s.trace_id, []).append(s)
        for trace_id, group in by_trace.items():
            written = self._written.get(trace_id)
            fresh = [s for s in group if written is None or s.span_id not in written]
            self.stats.duplicate_spans += len(group) - len(fresh)
            if trace_id in self._native or any(is_native(s) for s in fresh):
                self._native.add(trace_id)
                held = self._open.pop(trace_id, None)
                if held is not None:
                    self._buffered -= len(held.spans)
                    fresh = [*held.spans.values(), *fresh]
                self._direct.append((trace_id, fresh))
            elif written is not None:
                self.stats.late_spans += len(fresh)
                self._direct.append((trace_id, fresh))
            else:
                t = self._open.setdefault(trace_id, OpenTrace())
                before = len(t.spans)
                t.spans.update((s.span_id, s) for s in fresh)
                self.stats.duplicate_spans += len(fresh) - (len(t.spans) - before)
                self._buffered += len(t.spans) - before
                t.has_root = t.has_root or any(not s.parent_span_id for s in fresh)
                t.last_seen = now
                t.changed = t.changed or len(t.spans) > before
        return set(by_trace)

    @property
    def buffered_logs(self) -> int:
        return sum(len(t.logs) for t in (*self._open.values(), *self._loose.values())) + len(self._direct_logs)

    def add_logs(self, logs: Sequence[PlainLog], now: float) -> set[str]:
        """Hold ``logs`` with their traces (or queue them to be written now); return those traces' ids."""
        self.stats.logs_received += len(logs)
        traces = set()
        for record in logs:
            record.seq, self._log_seq = self._log_seq, self._log_seq + 1
            tid = record.trace_id
            if record.log_id in self._written_logs:
                self.stats.duplicate_logs += 1
                continue
            if tid is None or tid in self._written or tid in self._native:
                self._direct_logs.append(record)
                continue
            traces.add(tid)
            t = self._loose.get(tid) or self._open.setdefault(tid, OpenTrace())
            if record.log_id in t.logs:
                self.stats.duplicate_logs += 1
                continue
            t.logs[record.log_id] = record
            t.last_seen = max(t.last_seen, now)
            t.changed = True
        return traces

    def held_logs(self, logs: Sequence[PlainLog]) -> list[PlainLog]:
        """Those of ``logs`` that are only in memory (held with an open trace, or queued)."""
        queued = {r.log_id for r in self._direct_logs}
        out = []
        for r in logs:
            t = self._open.get(r.trace_id or "") or self._loose.get(r.trace_id or "")
            if (t is not None and r.log_id in t.logs) or r.log_id in queued:
                out.append(r)
        return out

    def restore(self, spans: Sequence[PlainSpan], written: Sequence[tuple[str, str, str | None]],
                now: float, ages: Mapping[str, float] | None = None, logs: Sequence[PlainLog] = (),
                written_logs: Sequence[str] = ()) -> None:
        """Take back what a receiver that died left in the journal: the ids it had written lately (so
        a retried span is dropped, a late one placed), then its open spans, held as if received
        ``ages[trace]`` seconds before ``now`` (when the journal last took a span of that trace), so
        settle and idle timeout count from then: a complete trace taken back is due at once."""
        for trace_id, span_id, run_id in written:
            self._remember(trace_id, span_id, run_id)
        self._written_logs.update(dict.fromkeys(written_logs))
        received = self.stats.spans_received
        self.add(spans, now)
        self.stats.spans_received = received
        self.stats.recovered_spans += len(spans)
        received = self.stats.logs_received
        self.add_logs(sorted(logs, key=lambda r: r.seq), now)
        self.stats.logs_received = received
        self.stats.recovered_logs += len(logs)
        for trace_id, age in (ages or {}).items():
            t = self._open.get(trace_id)
            if t is not None:
                t.last_seen = now - age
        for t in self._open.values():  # the receiver that died may have previewed them
            t.previewed = self.previewing

    def previews(self) -> list[tuple[str, list[PlainSpan]]]:
        """The open traces to preview now (live.py): those without their root (a trace whose root has
        arrived is written within ``settle``) that received spans since their last preview."""
        out = []
        for trace_id, t in self._open.items():
            if t.changed and not t.has_root and t.spans and trace_id not in self._in_flight:
                t.changed, t.previewed = False, True
                out.append((trace_id, join(list(t.spans.values()), t.logs.values())[0]))
        return out

    def rows_of(self, spans: list[PlainSpan]) -> dict[str, list[Any]]:
        """The rows of one trace's ``spans``: the one mapping, for final writes and previews alike.
        Pure: safe to call without the receiver's lock."""
        return trace_rows(spans, (), None, source=self.source)

    def held(self, spans: Sequence[PlainSpan]) -> list[PlainSpan]:
        """Those of ``spans`` that are only in memory: in an open trace, a held loose call, or queued
        to be written again after a failed write. (A span written, or dropped as a duplicate, is not.)"""
        queued = {(tid, s.span_id) for tid, group in self._direct for s in group}
        out = []
        for s in spans:
            t = self._open.get(s.trace_id) or self._loose.get(s.trace_id)
            if (t is not None and s.span_id in t.spans) or (s.trace_id, s.span_id) in queued:
                out.append(s)
        return out

    def take(self, now: float, *, only: set[str] | None = None, everything: bool = False) -> Batch:
        """Remove and map what is due: settled complete traces, idle ones, the overflow, direct spans.
        With ``only``, just those traces are considered (a request's own; the flusher looks at all)."""
        candidates = self._open if only is None else {t: self._open[t] for t in only if t in self._open}
        # A trace whose earlier write is still under way (outside the receiver's lock) waits for it:
        # what came for it meanwhile is placed once that write is done (``done``), never written twice.
        due = [tid for tid, t in candidates.items() if tid not in self._in_flight and everything
               or (t.has_root and now - t.last_seen >= self.settle)
               or (self.idle_timeout is not None and now - t.last_seen >= self.idle_timeout)]
        over = self._buffered - sum(len(self._open[t].spans) for t in due) - self.max_buffered_spans
        if over > 0 and only is None:
            for tid, t in sorted(self._open.items(), key=lambda kv: kv[1].last_seen):
                if over <= 0:
                    break
                if tid not in due and tid not in self._in_flight:
                    due.append(tid)
                    over -= len(t.spans)
        # A client retrying after a failed write resends what is queued here already: once per span id.
        direct: dict[str, dict[str, PlainSpan]] = {}
        waiting = [(tid, spans) for tid, spans in self._direct if tid in self._in_flight]
        for tid, spans in self._direct:
            if tid not in self._in_flight:
                direct.setdefault(tid, {}).update((s.span_id, s) for s in spans)
        self._direct = waiting
        batch = Batch()
        revision = time.time_ns()  # after every preview taken so far (live.py)
        for tid in due:
            t = self._open.pop(tid)
            spans = list(t.spans.values())
            if spans and loose(spans):
                self._loose[tid] = t  # still counted in _buffered
                continue
            self._buffered -= len(t.spans)
            logs = list(t.logs.values())
            rows = trace_rows(spans, logs, None, source=self.source)
            if t.previewed:
                rows = {**rows, **closing_rows([tid], revision)}
            batch.parts.append(Part(tid, spans, rows, t, logs))
        batch.parts.extend(self._conversations(now, everything))
        for tid, by_id in direct.items():
            spans = list(by_id.values())
            batch.parts.append(Part(tid, spans, trace_rows(spans, (), self._written.get(tid), source=self.source),
                                    None))
        if any(r.log_id not in self._in_flight_logs for r in self._direct_logs):
            batch.parts.append(self._loose_logs())
        for part in batch.parts:
            self._in_flight.update({s.trace_id for s in part.spans} | {part.trace_id} if part.spans else ())
            self._in_flight_logs.update(r.log_id for r in part.logs)
        return batch

    def _landed(self, parts: Sequence[Part]) -> None:
        """``parts`` are no longer being written (written, held again or given up)."""
        for part in parts:
            self._in_flight.difference_update({s.trace_id for s in part.spans} | {part.trace_id})
            self._in_flight_logs.difference_update(r.log_id for r in part.logs)

    def _loose_logs(self) -> Part:
        """The queued records of no trace (``kept``) and of written traces (``late``, under their run)."""
        once = {r.log_id: r for r in self._direct_logs}  # a record put back and resent is written once
        logs = [r for r in once.values() if r.log_id not in self._in_flight_logs]
        self._direct_logs = [r for r in once.values() if r.log_id in self._in_flight_logs]
        late = [r for r in logs if r.trace_id is not None and r.trace_id in self._written]
        if late:
            self.stats.late_logs += len(late)
            log.warning("looptrace collect: %d log records came after their trace was written; kept in "
                        "log_records as 'late' (raise --settle if the sender's log batches lag its spans)",
                        len(late))
        run_of = {r.span_id: self._written[r.trace_id].get(r.span_id) for r in late if r.span_id}
        status = {r.log_id: LATE for r in late}
        return Part("", [], {"log_records": log_rows(logs, status, run_of)}, None, logs)

    def _conversations(self, now: float, everything: bool) -> list[Part]:
        """The held loose calls as one part per run, once no loose call came for ``conversation_settle``."""
        if not self._loose or not (everything or now - max(t.last_seen for t in self._loose.values())
                                   >= self.conversation_settle):
            return []
        held, self._loose = self._loose, {}
        traces = {tid: join(list(t.spans.values()), t.logs.values())[0] for tid, t in held.items()}
        parts = []
        try:
            groups = group_conversations(list(traces.values()))
        except Exception:  # noqa: BLE001 - a grouping bug costs the grouping: each call is then a run
            log.warning("looptrace collect: could not group %d model calls into runs", len(traces), exc_info=True)
            groups = list(traces.values())
        revision = time.time_ns()
        for spans in groups:
            merged = OpenTrace(has_root=True, last_seen=max(held[s.trace_id].last_seen for s in spans))
            merged.spans = {s.span_id: s for s in spans}
            merged.previewed = any(held[s.trace_id].previewed for s in spans)
            merged.logs = {i: r for tid in dict.fromkeys(s.trace_id for s in spans) for i, r in held[tid].logs.items()}
            self._buffered -= len(spans)
            rows = trace_rows(spans, list(merged.logs.values()), None, source=self.source)
            if merged.previewed:
                rows = {**rows, **closing_rows([s.trace_id for s in spans if held[s.trace_id].previewed],
                                               revision)}
            parts.append(Part(spans[0].trace_id, spans, rows, merged, list(merged.logs.values())))
        return parts

    def done(self, parts: Sequence[Part]) -> None:
        """``parts`` are in the store: remember their spans' ids and runs."""
        self._landed(parts)
        for part in parts:
            rows = part.rows.get("spans", [])
            if part.held is None:  # looptrace's own trace, written as it arrives: counted once, when first seen
                self.stats.traces_written += len({r["trace_id"] for r in rows} - set(self._written))
            for row in rows:
                self._remember(row["trace_id"], row["span_id"], row["run_id"])
            self.stats.spans_written += len(part.spans)
            self.stats.logs_written += len(part.logs)
            for r in part.logs:
                self._written_logs[r.log_id] = None
            while len(self._written_logs) > REMEMBERED_SPANS:
                self._written_logs.popitem(last=False)
            self.stats.runs_written += len({r["run_id"] for r in part.rows.get("run_records", ()) if r.get("run_id")})
            if part.held is not None:
                self.stats.traces_written += len({s.trace_id for s in part.spans})
                self.stats.incomplete_traces += not part.held.has_root
                self._late_while_written({s.trace_id for s in part.spans})
        self._resent_while_written()

    def _resent_while_written(self) -> None:
        """Spans and records queued to be written at once while the write that holds them was under way
        (a receiver that writes outside its lock; a client that resent them meanwhile): dropped now
        that they are written, so nothing is stored twice."""
        if self._direct:
            kept = []
            for tid, group in self._direct:
                known = self._written.get(tid) or {}
                fresh = [s for s in group if s.span_id not in known]
                self.stats.duplicate_spans += len(group) - len(fresh)
                if fresh:
                    kept.append((tid, fresh))
            self._direct = kept
        if self._direct_logs:
            fresh_logs = [r for r in self._direct_logs if r.log_id not in self._written_logs]
            self.stats.duplicate_logs += len(self._direct_logs) - len(fresh_logs)
            self._direct_logs = fresh_logs

    def _late_while_written(self, traces: set[str]) -> None:
        """Spans that arrived for these traces while they were being written (a receiver that writes
        outside its lock) were held as a new open trace: they are late spans of the written one."""
        for trace_id in traces:
            t = self._open.pop(trace_id, None)
            if t is None:
                continue
            late = [r for r in t.logs.values() if r.log_id not in self._written_logs]  # else a resend
            self.stats.duplicate_logs += len(t.logs) - len(late)
            self._direct_logs.extend(late)  # late records of the written trace
            self._buffered -= len(t.spans)
            known = self._written.get(trace_id, {})
            fresh = [s for span_id, s in t.spans.items() if span_id not in known]  # a resend: dropped
            self.stats.duplicate_spans += len(t.spans) - len(fresh)
            self.stats.late_spans += len(fresh)
            if fresh:
                self._direct.append((trace_id, fresh))

    def put_back(self, parts: Sequence[Part], error: str) -> bool:
        """Writing ``parts`` failed: hold them again, to be retried with the next write.
        True if this error is new (worth logging), False if it repeats the last one."""
        self._landed(parts)
        new = error != self.stats.last_error
        self.stats.write_errors += 1
        self.stats.last_error = error
        for part in parts:
            if part.held is None:
                if part.spans:
                    self._direct.insert(0, (part.trace_id, part.spans))
                self._direct_logs[:0] = part.logs
                continue
            held = self._open.setdefault(part.trace_id, OpenTrace(last_seen=part.held.last_seen))
            held.previewed = held.previewed or part.held.previewed
            before = len(held.spans)
            held.spans = {**part.held.spans, **held.spans}
            held.has_root = held.has_root or part.held.has_root
            held.logs = {**part.held.logs, **held.logs}
            self._buffered += len(held.spans) - before
        return new

    def refused(self, error: str) -> None:
        """A trace's runs and steps could not be stored; its spans were."""
        self.stats.refused_traces += 1
        self.stats.last_error = error

    def lost(self, part: Part, error: str) -> None:
        """``part`` cannot be stored even as bare spans: counted, never retried."""
        self._landed([part])
        self.stats.write_errors += 1
        self.stats.lost_spans += len(part.spans)
        self.stats.last_error = error

    def _remember(self, trace_id: str, span_id: str, run_id: str | None) -> None:
        known = self._written.setdefault(trace_id, {})
        self._written.move_to_end(trace_id)
        if span_id not in known:
            known[span_id] = run_id
            self._remembered += 1
        while self._remembered > REMEMBERED_SPANS and len(self._written) > 1:
            old_id, old = self._written.popitem(last=False)
            self._remembered -= len(old)
            self._native.discard(old_id)

