"""Previews of open traces: what ``looptrace collect`` shows of a run while it runs. Pure functions.

A trace is mapped to runs and steps once it ends (receiver.py), and an agent's trace ends when its run
does: until then only its spans are stored (in the journal). So that a run still going can be watched,
the receiver maps each open trace that received spans since its last preview again, about once a
second, with the same mapping as the final write (``TraceBuffer.rows_of``: nothing here knows a
convention), and writes the record rows as one *revision* of the trace into the live tables
(store/tables.py, ``LIVE_TABLES``). A run whose span has not ended is ``running``.

The views show a trace's latest revision until its final write, which closes the trace in
``live_traces`` in the same segment as its records (``closing_rows``): a run is shown once, from its
preview or from its records, never both. A revision is the wall clock (ns) when the preview was taken
under the receiver's lock, so a closing row always outranks a preview taken before it, whatever order
their segments land in, and a receiver restarted after a crash outranks the one that died.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...store.tables import LIVE_TABLES

__all__ = ["RUNNING", "LIVE_TRACES", "preview_rows", "closing_rows", "merge"]

RUNNING = "running"
LIVE_TRACES = "live_traces"

Rows = dict[str, list[dict[str, Any]]]


def preview_rows(trace_id: str, rows: Mapping[str, Sequence[Mapping[str, Any]]], revision: int) -> Rows:
    """The record rows of an open trace (``rows_for_trace``) as revision ``revision`` of its preview.
    Its spans are left out: they are in the journal already (``open_spans``)."""
    out: Rows = {LIVE_TRACES: [{"trace_id": trace_id, "revision": revision, "open": True}]}
    for table, live in LIVE_TABLES.items():
        tagged = [{**row, "live_trace_id": trace_id, "live_revision": revision} for row in rows.get(table, ())]
        if table == "run_records":
            for row in tagged:
                if row.get("status") is None and row.get("ended_at") is None:  # its span has not ended
                    row["status"] = RUNNING
        if tagged:
            out[live] = tagged
    return out


def closing_rows(trace_ids: Iterable[str], revision: int) -> Rows:
    """Rows saying the traces ``trace_ids`` are written: their previews are no longer shown."""
    return {LIVE_TRACES: [{"trace_id": t, "revision": revision, "open": False} for t in dict.fromkeys(trace_ids)]}


def merge(batches: Iterable[Rows]) -> Rows:
    """Several batches of rows (table -> rows) as one, to be written as one segment."""
    out: Rows = {}
    for batch in batches:
        for table, rows in batch.items():
            out.setdefault(table, []).extend(rows)
    return out
