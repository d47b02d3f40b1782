"""A durable ``collect --catalog``: the receiver's journal in a local DuckDB file, its traces in the catalog.

The journal (``tracer/ingest/otlp/journal.py``) keeps every acknowledged span of an open trace in ``received_spans``
until the trace is written, and a span counts as written once ``spans`` holds it in the same store.
An Iceberg catalog cannot hold the journal (it is keyed by trace, the catalog is partitioned by run),
so a catalog receiver keeps it in a DuckDB file of its own (``--journal``, default
``journal_path``) and writes traces through ``JournaledCatalogWriter``, which

1. appends the trace's rows to the catalog (``CatalogStore.write``, ``run_records`` last), then
2. closes its spans in the journal file: a ``spans`` row per span with its ids, name and run only,
   which is all the journal's queries read (the rows themselves live in the catalog).

A kill between 1 and 2, or in the middle of 1, leaves spans open that the catalog holds, whole or
in part; so does a write that failed in the middle of 1 (the catalog's database restarting, the
warehouse full), which the receiver retries: those of its traces the journal holds open (asked when
they are written again, not at the failure) are treated as taken back too. The next receiver on that journal takes them back and writes their traces again; this
writer, told which traces were open at start (``retaken``: the journal's, read by the caller, since
the store layer does not read the receiver's journal), first removes whatever the catalog has of those traces (``delete_runs``: their runs and
their spans), so every run ends up in the catalog once. Run ids are derived from the trace, so the
second write names the same runs as the first.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..segments import SegmentWriter

if TYPE_CHECKING:
    import pyarrow as pa

    from .catalog import CatalogStore

__all__ = ["JournaledCatalogWriter", "journal_path"]

# The span columns the journal's queries read (OPEN_SPANS_SQL, WRITTEN_SPANS_SQL); name is NOT NULL.
_CLOSING = ("trace_id", "span_id", "name", "run_id")
# Process counters have no catalog table; they stay with the receiver, in its journal file.
_LOCAL = ("writer_stats",)


def journal_path(catalog: str, port: int | None) -> Path:
    """The default journal of a receiver of ``catalog`` on ``port``: one per catalog and port under
    ``$XDG_STATE_HOME/looptrace`` (``~/.local/state``), so a receiver restarted as it was finds the
    traces its predecessor left open, and two receivers on one host never share one."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "looptrace" / f"collect-{catalog}-{port if port is not None else 'grpc'}.duckdb"


class JournaledCatalogWriter:
    """The sink's ``RowWriter`` for a catalog receiver whose journal is the DuckDB file ``journal``."""

    def __init__(self, catalog: CatalogStore, journal: str | os.PathLike[str], *, retaken: Iterable[str] = (),
                 still_open: Callable[[], set[str]] | None = None, durable: bool = True) -> None:
        self.catalog = catalog
        self.journal = os.fspath(journal)
        Path(self.journal).parent.mkdir(parents=True, exist_ok=True)
        self._local = SegmentWriter(self.journal, durable=durable)
        # Traces a killed receiver left open: the catalog may hold some of their rows already.
        self._retaken = set(retaken)
        # The traces the journal holds open now (the caller's reader of it): after a failed write,
        # those of the batch are written again over what landed. Traces the receiver writes as they
        # arrive (looptrace's own spans) are not journaled, and are not removed: a run of theirs is
        # written over many batches, and removing it would remove the earlier ones.
        self._still_open = still_open
        # The traces of failed writes, some of whose rows may have landed: whether the journal holds
        # them is asked when they are written again, not at the failure. Then, the flusher may have
        # taken a trace whose spans' journal commit had not landed yet, and the journal did not list
        # it: written again without removing what landed, its spans were stored twice.
        self._suspect: set[str] = set()
        self.rewritten = 0  # traces written again after a crash (their earlier rows removed first)

    def write(self, rows: Mapping[str, Any]) -> str | None:
        from .catalog import as_store_arrow

        local = {t: rows[t] for t in _LOCAL if t in rows}
        data = {t: as_store_arrow(t, r) for t, r in rows.items() if t not in _LOCAL}
        spans = data.get("spans")
        traces = set(spans.column("trace_id").to_pylist()) if spans is not None else set()
        if self._suspect & traces and self._still_open is not None:
            # Journaled ones are written over what landed; a journal that cannot be read now fails
            # this write (an OSError: held, tried again) rather than guess.
            self._retaken.update(self._still_open() & self._suspect & traces)
        self._suspect -= traces
        again = self._retaken & traces
        # A failure here has written nothing: only one past it may leave rows to write over.
        tables = self.catalog.create_tables() if any(d.num_rows for d in data.values()) else None
        try:
            if again:
                self.catalog.delete_runs(sorted(_runs_of(data, again)), sorted(again), tables)
            snapshot = self.catalog.write(data, tables)
        except Exception:
            # Some tables of the batch may be committed (or a commit whose answer was lost): the
            # receiver holds these traces and writes them again, over whatever landed, as after a kill.
            self._suspect |= traces
            raise
        if spans is not None and spans.num_rows:
            self._local.write({"spans": {c: spans.column(c).to_pylist() for c in _CLOSING}})
        if local:
            self._local.write(local)
        self._retaken -= again
        self.rewritten += len(again)
        return snapshot


def _runs_of(data: Mapping[str, pa.Table], traces: set[str]) -> set[str]:
    """The runs of ``traces`` in this batch (by their run records and spans): only theirs are removed,
    never those of another trace in the same batch (a looptrace run is written over many)."""
    out: set[str] = set()
    for table in ("run_records", "spans"):
        if table in data:
            rows = data[table].select(["trace_id", "run_id"]).to_pylist()
            out.update(r["run_id"] for r in rows if r["trace_id"] in traces and r["run_id"] is not None)
    return out
