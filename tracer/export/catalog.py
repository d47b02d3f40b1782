"""``looptrace export --catalog NAME``: copy a DuckDB store's finished runs into an Iceberg catalog.

Idempotent by run: a run whose ``run_records`` are already in the catalog is never copied again, so
exporting twice adds nothing, and an export interrupted part-way is finished by the next one. The
rows were redacted when they entered the store, so they are copied as they are, not sent through
the sink again. Each chunk of runs is appended table by table with ``run_records`` last (the
catalog's own rule, ``CatalogStore.write``): a run counts as exported only once everything else of
it is in. Rows of no run (spans whose trace never became a run, model calls outside a run) are
copied once, by their span id and call id. Runs still running wait for a later export. An export
killed between two commits of a chunk leaves rows of runs that ``run_records`` lacks (readers do not
show them); the next export removes those rows of its runs before copying them again (``repaired``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..store import Store
from ..store.iceberg.layout import CATALOG_TABLES
from ..store.segments import arrow_schema

if TYPE_CHECKING:
    from ..store.iceberg import CatalogStore

__all__ = ["CatalogExport", "export_catalog", "CHUNK_RUNS"]

CHUNK_RUNS = 5_000  # runs per append: bounds memory (one chunk's rows in Arrow) and the commits' count

# Finished runs of the store (what the `runs` view calls anything but incomplete), oldest first.
FINISHED_RUNS_SQL = "SELECT run_id FROM runs WHERE status <> 'incomplete' ORDER BY started_at, run_id"
WAITING_RUNS_SQL = "SELECT count(*) FROM runs WHERE status = 'incomplete'"
# One table's rows for a chunk of runs, every column of the store's schema in order.
CHUNK_ROWS_SQL = "SELECT {columns} FROM {table} WHERE run_id IN (SELECT unnest(?::VARCHAR[]))"
# Rows of no run, keyed by the id that makes them unique.
RUNLESS_KEYS = {"spans": "span_id", "llm_call_records": "call_id"}
RUNLESS_ROWS_SQL = ("SELECT {columns} FROM {table} WHERE run_id IS NULL "
                    "AND {key} NOT IN (SELECT unnest(?::VARCHAR[]))")


@dataclass
class CatalogExport:
    runs: int = 0
    present: int = 0  # finished runs already in the catalog
    waiting: int = 0  # runs still running
    repaired: int = 0  # runs a killed export left in part: their rows removed, then copied again
    rows: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def _present_runs(catalog: CatalogStore) -> set[str]:
    tbl = catalog.table("run_records")
    if tbl is None:
        return set()
    return set(tbl.scan(selected_fields=("run_id",)).to_arrow().column("run_id").to_pylist())


def _present_runless(catalog: CatalogStore, table: str, key: str) -> list[str]:
    from pyiceberg.expressions import IsNull

    tbl = catalog.table(table)
    if tbl is None:
        return []
    found = tbl.scan(row_filter=IsNull("run_id"), selected_fields=(key,)).to_arrow().column(key).to_pylist()
    return [k for k in found if k is not None]


def export_catalog(db: str | os.PathLike[str], catalog: CatalogStore, *, chunk_runs: int = CHUNK_RUNS,
                   on_chunk: Callable[[int, int], None] | None = None) -> CatalogExport:
    """Copy the finished runs of the store at ``db`` that ``catalog`` lacks; ``on_chunk(done, total)``."""
    started = time.perf_counter()
    report = CatalogExport(rows=dict.fromkeys(CATALOG_TABLES, 0))
    catalog.create_tables()
    present = _present_runs(catalog)
    columns = {t: ", ".join(f'"{c}"' for c in arrow_schema(t).names) for t in CATALOG_TABLES}
    with Store(db).reader(locked_down=False) as conn:
        finished = [r[0] for r in conn.execute(FINISHED_RUNS_SQL).fetchall()]
        report.waiting = int(conn.execute(WAITING_RUNS_SQL).fetchall()[0][0])
        todo = [r for r in finished if r not in present]
        report.present = len(finished) - len(todo)
        if todo:
            # Only this store's runs: rows of other runs without run_records may be another writer's
            # batch being committed right now, not a crashed one.
            left = sorted(catalog.orphan_runs().intersection(todo))
            catalog.delete_runs(left)
            report.repaired = len(left)
        for start in range(0, len(todo), chunk_runs):
            ids = todo[start:start + chunk_runs]
            batch = {t: conn.sql(CHUNK_ROWS_SQL.format(columns=columns[t], table=t), params=[ids]).to_arrow_table()
                     for t in CATALOG_TABLES}
            _write(catalog, batch, report)
            report.runs += len(ids)
            if on_chunk is not None:
                on_chunk(start + len(ids), len(todo))
        runless = {t: conn.sql(RUNLESS_ROWS_SQL.format(columns=columns[t], table=t, key=key),
                               params=[_present_runless(catalog, t, key)]).to_arrow_table()
                   for t, key in RUNLESS_KEYS.items()}
        _write(catalog, runless, report)
    report.seconds = time.perf_counter() - started
    return report


def _write(catalog: CatalogStore, batch: dict, report: CatalogExport) -> None:
    batch = {t: d for t, d in batch.items() if d.num_rows}
    if batch:
        catalog.write(batch)
        for t, d in batch.items():
            report.rows[t] += d.num_rows
