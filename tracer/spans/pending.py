"""Rows the span exporter has prepared but not yet written: one segment's worth, gathered.

The batch processor hands the exporter spans every ``PREPARE_MILLIS``; each batch is turned into
redacted rows at once (``Sink.prepare``), on the processor's thread, and the rows wait here until a
segment is due (``schedule_delay_millis`` after the first of them, or ``EXPORT_BATCH`` spans) or a
flush asks for them. A final flush then only writes and fsyncs what is already prepared, plus the
last fraction of a second of spans, where it used to convert up to half a second of them while the
agent waited. Rows bound for segments are held as Arrow tables, converted as they are prepared: that
conversion was a third of a final flush's CPU (7-15 of 30-38 ms with ~350 spans prepared). Nothing here is durable, as the spans in the processor's queue were not: a flush (or
shutdown) is what says "stored". Nothing held here is unredacted either.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

from ..records.batch import TableData

__all__ = ["PendingRows", "merge_tables"]


class PendingRows:
    """Prepared tables of several batches and the spans they came from. Not thread-safe: the
    exporter holds its lock around every use."""

    def __init__(self) -> None:
        self._parts: list[Mapping[str, Any]] = []
        self.spans = 0
        self._since: float | None = None

    def __bool__(self) -> bool:
        return bool(self._parts)

    def add(self, tables: Mapping[str, Any], spans: int) -> None:
        """``tables``: prepared rows, or their Arrow tables (the exporter converts rows bound for
        segments before it takes the lock this holder is used under)."""
        if self._since is None:
            self._since = time.monotonic()
        self._parts.append(tables)
        self.spans += spans

    def age(self) -> float:
        """Seconds since the oldest rows held were added (0 when none are)."""
        return 0.0 if self._since is None else time.monotonic() - self._since

    def take(self) -> tuple[dict[str, TableData], int]:
        """Every table held, merged, and how many spans they came from; empties the holder."""
        parts, spans = self._parts, self.spans
        self._parts, self.spans, self._since = [], 0, None
        return merge_tables(parts), spans


def merge_tables(parts: Sequence[Mapping[str, TableData]]) -> dict[str, TableData]:
    """One table dict holding the rows of all ``parts``, table by table, in order. A table given as
    columns in every part stays columns (a column a part lacks is None there); one given as rows
    anywhere becomes rows; Arrow tables (of one schema) are concatenated."""
    if len(parts) == 1:
        return dict(parts[0])
    out: dict[str, TableData] = {}
    for table in dict.fromkeys(chain.from_iterable(parts)):
        pieces = [p[table] for p in parts if table in p]
        if all(_is_arrow(x) for x in pieces):
            import pyarrow as pa

            out[table] = pa.concat_tables(pieces)  # type: ignore[arg-type]
        elif all(isinstance(x, Mapping) for x in pieces):
            out[table] = _merge_columns(pieces)  # type: ignore[arg-type]
        else:
            out[table] = [row for x in pieces for row in _rows(x)]
    return out


def _merge_columns(pieces: Sequence[Mapping[str, Sequence[Any]]]) -> dict[str, list[Any]]:
    names = list(dict.fromkeys(chain.from_iterable(pieces)))
    merged: dict[str, list[Any]] = {name: [] for name in names}
    for piece in pieces:
        n = len(next(iter(piece.values()), ()))
        for name in names:
            values = piece.get(name)
            merged[name].extend(values if values is not None else [None] * n)
    return merged


def _is_arrow(data: Any) -> bool:
    return type(data).__name__ == "Table" and type(data).__module__.startswith("pyarrow")


def _rows(data: TableData) -> list[Mapping[str, Any]]:
    if isinstance(data, Mapping):
        return [dict(zip(data, values)) for values in zip(*data.values())]
    return list(data)
