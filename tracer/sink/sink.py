"""The sink: the one road from a source to the store. Normalise, redact, write.

Every source hands its records here: the span exporter (instrumentor, manual API, looptrace's own
loop), the OTLP receiver and the file importers. (The analyzer's diagnoses are derived from records
already stored and replace a run's earlier ones, which append-only segments cannot express: it
writes them in its own transaction.) The sink is the only code
that calls the redactor on the way in and the only code that writes segments, so no source can
forget either. Records are redacted as rows, after a source has mapped its data to them, so every
field a source fills (names, attributes, events, resources, arguments, observations, messages)
is covered whatever the source is (see ``rows.py``). Then what every record of a kind must carry is
derived in one place: a tool call's ``action_key`` (``records/actions.py``), from the redacted
arguments, so a stored key never fingerprints a secret, and what the analyzer compares its outcome
by (``progress_key``, ``near_key``, from the redacted observation): computed once here instead of by
two regex passes over every observation at every analysis.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..records.actions import (call_key, key_or_none, near_observation_key, near_observation_keys, progress_key,
                               progress_keys)
from ..records.batch import FORMAT_VERSION, Records, TableData
from ..store.backend import RowWriter, catalog_name
from ..store.segments import SegmentWriter
from ..store.tables import LIVE_TABLES
from .redact import Redactor
from .rows import redact_tables

__all__ = ["Sink"]


class Sink:
    """Writes record batches into the store at ``store_path`` as segments (see ``store/segments.py``),
    or into an Iceberg catalog when ``store_path`` is ``iceberg:NAME`` (``store/backend.py``).

    ``write`` raises what the write raised (a full disk, a read-only folder): each source decides
    what a failed write means for it (the exporter logs and counts it, the receiver answers 503 and
    keeps the trace, an import reports the file). Thread-safe.
    """

    def __init__(
        self, store_path: str | os.PathLike[str], *, redactor: Redactor | None = None, durable: bool = True,
        writer: RowWriter | None = None,
    ) -> None:
        self.store_path = os.fspath(store_path)
        self.redactor = redactor if redactor is not None else Redactor()
        # ``writer``: where redacted rows go instead of the target's own backend (a catalog receiver's
        # writer also closes its spans in a local journal, store/iceberg/journaled.py).
        self._writer = writer if writer is not None else _row_writer(store_path, durable)

    def write(self, records: Records | Mapping[str, TableData]) -> str | None:
        """Redact and write one batch as one segment (seen whole or not at all); its name, or None
        when the batch is empty."""
        return self.write_prepared(self.prepare(records))

    def prepare(self, records: Records | Mapping[str, TableData], to_hold: bool = False) -> dict[str, Any]:
        """What ``write`` does before writing: the batch checked, redacted and its keys derived. A
        source that gathers several batches into one segment (the span exporter) prepares each as
        it comes, so that nothing unredacted is held, and writes them together with
        ``write_prepared``; ``to_hold`` also converts them as the writer will write them (a segment's
        Arrow tables), so that the write of what is held converts nothing."""
        batch = records if isinstance(records, Records) else Records(dict(records))
        if batch.version != FORMAT_VERSION:
            raise ValueError(f"records of format version {batch.version}; this looptrace writes {FORMAT_VERSION}")
        tables = _derive(_unlisted(redact_tables(batch.tables, self.redactor)))
        convert = getattr(self._writer, "converted", None) if to_hold else None
        return {table: convert(table, data) for table, data in tables.items()} if convert else tables

    def write_prepared(self, tables: Mapping[str, TableData]) -> str | None:
        """Write tables ``prepare`` returned (or several of them merged) as one segment."""
        return self._writer.write(tables)


# The OTLP receiver's journal holds spans as they arrived, until their trace is mapped, and its previews
# hold what is derived of a trace still open: they are redacted like every record, but their redactions
# are listed once, with the records of the trace.
_UNLISTED = frozenset({"received_spans", "received_logs", *LIVE_TABLES.values()})


def _unlisted(tables: dict[str, TableData]) -> dict[str, TableData]:
    manifest = tables.get("redaction_records")
    if not manifest or _UNLISTED.isdisjoint(tables) or isinstance(manifest, Mapping):
        return tables
    kept = [r for r in manifest if r.get("record") not in _UNLISTED]
    return {**tables, "redaction_records": kept}


def _row_writer(target: str | os.PathLike[str], durable: bool) -> RowWriter:
    """Segments beside a DuckDB file, or appends to an Iceberg catalog (``iceberg:NAME``, store/backend.py)."""
    name = catalog_name(target)
    if name is not None:
        from ..store.iceberg import CatalogStore

        return CatalogStore(name)
    return SegmentWriter(target, durable=durable)


def _derive(tables: dict[str, TableData]) -> dict[str, TableData]:
    for name in ("tool_call_records", LIVE_TABLES["tool_call_records"]):  # a preview's calls are calls too
        calls = tables.get(name)
        if calls is not None:
            tables = {**tables, name: _keyed(calls)}
    return tables


def _keyed(calls: TableData) -> TableData:
    """Tool call rows with their ``action_key``, ``progress_key`` and ``near_key``."""
    if isinstance(calls, Mapping):
        cols = dict(calls)
        n = len(next(iter(cols.values()), ()))
        keys, tools, args, obs = (cols.get(c) or [None] * n for c in ("action_key", "tool", "args", "observation"))
        cols["action_key"] = [k if k is not None else call_key(tool, a) for k, tool, a in zip(keys, tools, args)]
        for name, key, column_keys in _OUTCOME_KEYS:
            given = cols.get(name)
            if given is None or all(g is None for g in given):
                cols[name] = column_keys(obs)  # the whole column at once (records/actions.py)
            else:
                cols[name] = [g if g is not None else key_or_none(key, o) for g, o in zip(given, obs)]
    else:
        cols = [{**r, "action_key": r.get("action_key") or call_key(r.get("tool"), r.get("args")),
                 **{name: r.get(name) or key_or_none(key, r.get("observation")) for name, key, _ in _OUTCOME_KEYS}}
                for r in calls]
    return cols


# Each outcome key's column, its definition for one value, and for a whole column (records/actions.py).
_OUTCOME_KEYS = (("progress_key", progress_key, progress_keys),
                 ("near_key", near_observation_key, near_observation_keys))
