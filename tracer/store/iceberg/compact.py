"""``looptrace compact --catalog NAME``: rewrite each partition's small data files as one.

Every receiver's batch is one Iceberg append, so a busy catalog collects many small files, and a
reader pays per file. Compaction reads one partition's current files and replaces exactly those
files (never "the partition": files appended meanwhile by a live receiver are not named, so they
stay) with one rewritten file, in one overwrite snapshot. If the commit races another writer,
pyiceberg (or, for the diagnoses table, this code after a refresh) retries it with the same file
lists, which is still right; if its validation refuses
(someone deleted one of those files), the partition is planned again. Rows do not change, only
how many files hold them. Old snapshots keep the small files until snapshots are expired
(pyiceberg's ``table.maintenance.expire_snapshots()``, or Spark's ``expire_snapshots`` procedure).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .catalog import CatalogError, CatalogStore, as_store_arrow
from .errors import retrying_on
from .layout import CATALOG_TABLES
from .session import local_path

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = ["CompactReport", "compact_catalog"]


@dataclass
class CompactReport:
    files_before: dict[str, int] = field(default_factory=dict)
    files_after: dict[str, int] = field(default_factory=dict)
    partitions_rewritten: int = 0


def _by_partition(tasks: list[Any]) -> dict[Any, list[Any]]:
    groups: dict[Any, list[Any]] = defaultdict(list)
    for task in tasks:
        groups[tuple(task.file.partition)].append(task)
    return groups


def _rewrite(tbl: Table, table: str, files: list[Any]) -> None:
    """Replace ``files`` (DataFiles of one partition) with the same rows in as few files as fit."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import _dataframe_to_data_files  # what Table.append writes files with

    paths = [local_path(f.file_path) for f in files]
    if any(p is None for p in paths):
        raise CatalogError(f"{tbl.name()}: compaction reads local data files only (docs/scale.md)")
    data = pa.concat_tables([as_store_arrow(table, pq.read_table(p)) for p in paths if p is not None])
    with tbl.transaction() as tx, tx.update_snapshot().overwrite() as rewrite:
        for f in files:
            rewrite.delete_data_file(f)
        for new in _dataframe_to_data_files(table_metadata=tx.table_metadata, df=data, io=tbl.io,
                                            write_uuid=rewrite.commit_uuid):
            rewrite.append_data_file(new)


def compact_catalog(store: CatalogStore) -> CompactReport:
    from pyiceberg.exceptions import ValidationException

    report = CompactReport()
    for table in CATALOG_TABLES:
        tbl = store.table(table)
        if tbl is None:
            continue
        tasks = list(tbl.scan().plan_files())
        report.files_before[table] = len(tasks)
        for tasks_of_partition in _by_partition(tasks).values():
            if len(tasks_of_partition) < 2 or any(t.delete_files for t in tasks_of_partition):
                continue  # one file already; or rows deleted by another engine, which a rewrite must not revive

            def attempt(group: list[Any] = tasks_of_partition) -> None:
                try:
                    _rewrite(tbl, table, [t.file for t in group])
                except ValidationException:
                    tbl.refresh()  # a file of the group is gone: this partition is left for a later run
                    raise CatalogError(f"{table}: a file being compacted was changed by another writer") from None

            try:  # a lost race pyiceberg did not retry itself (diagnoses: OWN_RETRIES) refreshes first
                retrying_on(tbl, attempt, f"compacting {table}")
                report.partitions_rewritten += 1
            except CatalogError:
                continue
            tbl.refresh()
        report.files_after[table] = len(list(tbl.scan().plan_files()))
    return report
