"""Writing what the trace buffer took: one segment, and a failure that costs as little as it can.

A batch (``parts.py``: the traces due, each with its rows) is written through the sink as one segment.
An I/O error holds it all again in the buffer (``TraceBuffer.put_back``): the flusher retries, and the
spans are journaled meanwhile. A value the store refuses is found by writing the batch again trace by
trace, so it costs only its own trace's runs and steps (written as bare spans, ``spans_only``) and never
blocks the others; a trace refused even as bare spans is counted lost. The receiver (receiver.py) says
when to write and under which lock; this module says what a failed write costs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from ...sink import Sink
from .buffer import TraceBuffer
from .live import LIVE_TRACES
from .parts import Batch, Part
from .stats import ReceiverStats
from .trace_rows import spans_only

__all__ = ["TraceWriter"]

log = logging.getLogger("looptrace.ingest")


class TraceWriter:
    """Writes a ``TraceBuffer``'s batches to ``sink`` and tells the buffer how each part went."""

    def __init__(self, sink: Sink, buffer: TraceBuffer, db: str) -> None:
        self.sink, self.buffer, self.db = sink, buffer, db  # ``db``: named in the log on an I/O error

    @property
    def stats(self) -> ReceiverStats:
        return self.buffer.stats

    def write(self, batch: Batch, guard: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()) -> bool:
        """Write ``batch`` as one segment. An I/O error holds it all again (False: the client retries);
        a value the store refuses is found by writing trace by trace, so it costs only its own trace's
        runs and steps (written as bare spans) and never blocks the others. ``guard``: what to hold
        while the buffer is updated, when the caller does not hold the receiver's lock (its
        ``_write_batch``)."""
        try:
            self.sink.write(batch.rows)
        except OSError as exc:
            with guard:
                self._held_again(batch.parts, exc)
            return False
        except Exception:  # noqa: BLE001 - bad data: isolated below
            return self._write_apart(batch.parts, guard)
        with guard:
            self.buffer.done(batch.parts)
        return True

    def _write_apart(self, parts: Sequence[Part], guard: contextlib.AbstractContextManager[Any]) -> bool:
        for i, part in enumerate(parts):
            # Bare, a trace is still written: its previews are closed with it.
            bare = {**spans_only(part.spans), **{t: r for t, r in part.rows.items() if t == LIVE_TRACES}}
            for rows in (part.rows, bare):
                try:
                    self.sink.write(rows)
                except OSError as exc:
                    with guard:
                        self._held_again(parts[i:], exc)
                    return False
                except Exception as exc:  # noqa: BLE001 - try the bare spans, then give up on this trace
                    error = f"{type(exc).__name__}: {exc}"
                    log.warning("looptrace collect: the store refused rows of trace %s: %s",
                                part.trace_id, error)
                    continue
                with guard:
                    if rows is not part.rows:
                        self.buffer.refused(error)
                    self.buffer.done([replace(part, rows=rows)])
                break
            else:
                with guard:
                    self.buffer.lost(part, error)
        return True

    def _held_again(self, parts: Sequence[Part], exc: OSError) -> None:
        if self.buffer.put_back(parts, f"{type(exc).__name__}: {exc}"):
            log.warning("looptrace collect: could not write to %s (retrying): %s", self.db, exc)

    def write_stats(self) -> None:
        """A ``writer_stats`` row for this receiver, at its end; never raises (it is a summary)."""
        s = self.stats
        row = {"pid": os.getpid(), "host": socket.gethostname(),
               "recorded_at": datetime.now(timezone.utc).replace(tzinfo=None),
               "spans_received": s.spans_received, "spans_written": s.spans_written,
               "spans_dropped": self.buffer.buffered_spans + s.lost_spans,
               "write_errors": s.write_errors + s.refused_traces,
               "last_error": s.last_error}
        if s.spans_received or s.write_errors:
            with contextlib.suppress(Exception):
                self.sink.write({"writer_stats": [row]})
