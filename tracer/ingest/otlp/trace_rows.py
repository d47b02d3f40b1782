"""One trace's rows: the one mapping, applied so that a failure costs the runs, never the spans.

Every write of the receiver (a settled trace, a loose model call grouped with its loop, spans queued to
be written at once, a preview) maps spans to rows here. A trace the mapping cannot read (a convention
bug, a value it does not expect) is still stored, as bare spans (``spans_only``); a trace the loose-call
test cannot classify is mapped on its own rather than held for grouping. Log records held with a trace
are joined to its spans first (``events.py``) and kept as ``log_records`` rows under their span's run.
Pure functions over plain data: no I/O, no lock.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ...records.spans import PlainSpan, rows_for_spans
from .conventions import rows_for_trace
from .conversations import is_loose_call
from .events import JOINED, KEPT, PlainLog, join, log_rows

__all__ = ["trace_rows", "spans_only", "loose"]

log = logging.getLogger("looptrace.ingest")


def trace_rows(spans: list[PlainSpan], logs: Sequence[PlainLog], stored: Mapping[str, str | None] | None, *,
               source: str) -> dict[str, list[Any]]:
    """The rows of a trace: its spans, joined with its records (``events.py``), by the one mapping;
    and its records as ``log_records`` rows, under the run of their span. ``stored``: the span ids of
    the trace already written, with their runs (late spans are placed under them)."""
    used: set[str] = set()
    try:
        joined, used = join(spans, logs)
        rows = rows_for_trace(joined, source=source, stored=stored)
    except Exception as exc:  # noqa: BLE001 - a mapping bug must cost the runs, never the spans
        log.warning("looptrace collect: could not map trace %s (%s: %s); kept its spans only",
                    spans[0].trace_id if spans else "?", type(exc).__name__, exc)
        rows = spans_only(spans)
    if logs:
        run_of = {r["span_id"]: r["run_id"] for r in rows.get("spans", ())}
        rows = {**rows, "log_records": log_rows(logs, dict.fromkeys(used, JOINED), run_of, KEPT)}
    return rows


def loose(spans: Sequence[PlainSpan]) -> bool:
    """The trace is one loose model call of a bare SDK loop (``conversations.py``); False when unsure."""
    try:
        return is_loose_call(spans)
    except Exception:  # noqa: BLE001 - a mapping bug must cost the grouping, never the spans
        log.warning("looptrace collect: could not classify trace %s", spans[0].trace_id if spans else "?",
                    exc_info=True)
        return False


def spans_only(spans: Sequence[PlainSpan]) -> dict[str, list[dict[str, Any]]]:
    """``spans`` rows alone (no runs or steps), with a run id only where it is text."""
    rows = rows_for_spans(spans)["spans"]
    for row in rows:
        if not isinstance(row["run_id"], str):
            row["run_id"] = None
    return {"spans": rows}
