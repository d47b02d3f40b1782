"""What the trace buffer holds and hands to the writer (see buffer.py, receiver.py).

An ``OpenTrace`` is a trace still being received. ``TraceBuffer.take`` removes what is due and maps it:
a ``Batch`` of ``Part``s, one per trace (or per run of grouped loose calls, or queued log records), each
with its rows and what to hold again (``TraceBuffer.put_back``) if the write fails. Plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...records.spans import PlainSpan
from .events import PlainLog

__all__ = ["OpenTrace", "Part", "Batch"]


@dataclass
class OpenTrace:
    """A trace still being received: its spans and log records by id, and when the last came."""


    spans: dict[str, PlainSpan] = field(default_factory=dict)
    has_root: bool = False
    last_seen: float = 0.0
    changed: bool = True  # spans came since its last preview (live.py)
    previewed: bool = False  # a preview of it may be in the store: its final write closes it
    logs: dict[str, PlainLog] = field(default_factory=dict)  # its log records, by log id


@dataclass
class Part:
    """One trace's rows in a batch, and what to hold again if they cannot be written."""

    trace_id: str
    spans: list[PlainSpan]
    rows: dict[str, list[dict[str, Any]]]
    held: OpenTrace | None  # a buffered trace; None for spans queued to be written at once
    logs: list[PlainLog] = field(default_factory=list)  # its log records written with it


@dataclass
class Batch:
    parts: list[Part] = field(default_factory=list)

    @property
    def rows(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for part in self.parts:
            for table, rows in part.rows.items():
                out.setdefault(table, []).extend(rows)
        return out
