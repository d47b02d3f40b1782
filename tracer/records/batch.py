"""The records batch: what every source hands to the sink.

A source (the span exporter, the OTLP receiver, a file importer, the analyzer writing diagnoses)
produces rows of a few kinds of record, each kind one base table of the store. A batch holds them
table by table, each table either as rows (dicts) or as columns (a dict of equal-length lists: the
span exporter builds columns, since it converts thousands of spans a second). The ``version`` says
which shape of these records the batch follows; the sink refuses a version it does not know rather
than write rows it would misread.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FORMAT_VERSION", "KINDS", "Columns", "Rows", "TableData", "Records"]

FORMAT_VERSION = 1

# Record kind -> the base table that holds it (docs/schema.md documents each table column by column).
KINDS: dict[str, str] = {
    "run": "run_records",
    "step": "step_records",
    "llm_call": "llm_call_records",
    "tool_call": "tool_call_records",
    "span": "spans",
    "diagnosis": "diagnoses",
    "writer_stats": "writer_stats",
    "export_drop": "export_drops",
    "redaction": "redaction_records",  # written by the sink itself: the redaction manifest
    "received_span": "received_spans",  # the OTLP receiver's journal of spans as they arrived
    "log_record": "log_records",  # OTLP log records (GenAI events), kept once their trace is written
    "received_log": "received_logs",  # the OTLP receiver's journal of log records as they arrived
    # The OTLP receiver's previews of traces still open (ingest/otlp/live.py): which revision is current,
    # and the records derived so far, each row tagged with its trace and revision.
    "live_trace": "live_traces",
    "live_run": "live_run_records",
    "live_step": "live_step_records",
    "live_tool_call": "live_tool_call_records",
    "live_llm_call": "live_llm_call_records",
}
_TABLES = frozenset(KINDS.values())

Columns = dict[str, list[Any]]  # one table's rows, column by column
Rows = Sequence[Mapping[str, Any]]
TableData = Rows | Mapping[str, Sequence[Any]]


def _length(data: TableData) -> int:
    if isinstance(data, Mapping):
        return len(next(iter(data.values()), ()))
    return len(data)


@dataclass
class Records:
    """Rows of records, by table. Build with ``Records({"run_records": [...], ...})`` or
    ``Records.of(run=[...], step=[...])``."""

    tables: dict[str, TableData] = field(default_factory=dict)
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        unknown = set(self.tables) - _TABLES
        if unknown:
            raise ValueError(f"unknown record tables {sorted(unknown)}; known: {sorted(_TABLES)}")

    @classmethod
    def of(cls, **kinds: TableData) -> Records:
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown record kinds {sorted(unknown)}; known: {sorted(KINDS)}")
        return cls({KINDS[k]: v for k, v in kinds.items()})

    def __len__(self) -> int:
        return sum(_length(t) for t in self.tables.values())

    def __iter__(self) -> Iterator[tuple[str, TableData]]:
        return iter(self.tables.items())

    def rows(self, table: str) -> list[dict[str, Any]]:
        """One table's records as rows, whichever way they are held."""
        data = self.tables.get(table)
        if data is None:
            return []
        if isinstance(data, Mapping):
            return [dict(zip(data, values)) for values in zip(*data.values())]
        return [dict(r) for r in data]
