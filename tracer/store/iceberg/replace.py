"""Replacing some runs' rows of a table in one commit, planned on the snapshot it was read from.

``analyze`` replaces the diagnoses of the runs it analysed (``CatalogStore.replace_diagnoses``).
pyiceberg's ``overwrite(rows, In("run_id", ids))`` does it, but it binds and projects every id of
the filter for every manifest and data file (a murmur3 hash per id and file for the bucket
partitions): 0.8 s of CPU for 4,000 runs, ~5 s for 20,000, after the analysis and the same on every
engine. Here the plan is made from the data: each data file's ``run_id`` column is read (a few KB a
file), a file holding only replaced runs is dropped, a file holding none of them is left alone, a
file holding both is rewritten with the other runs' rows, and one overwrite snapshot names exactly
those files and adds the new rows (0.15-0.2 s of CPU for 4,000 runs).

A plan made from a snapshot is right on that snapshot only: a file another writer added meanwhile
may hold rows of these runs (kept beside the new ones: twice), and the file a plan rewrites may have
been replaced. So the commit lands on the snapshot the plan was made from or not at all: its
requirement is that the branch still points there (an Iceberg commit is a compare-and-swap), the
table's own commit retries are off (``OWN_RETRIES``: pyiceberg would retry by committing the same
plan on the newer snapshot, safe only as far as its validation of concurrent changes goes, which
depends on the table's isolation level), and the caller's retry (``errors.retrying``) refreshes the
table and plans again. A conflict costs one more plan; another writer's rows are never lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table

__all__ = ["OWN_RETRIES", "replace_runs"]

# Table properties of a table whose commits this module plans: pyiceberg never retries them itself.
OWN_RETRIES = {"commit.retry.num-retries": "0"}


def replace_runs(tbl: Table, run_ids: Sequence[str], data: pa.Table) -> None:
    """The rows of ``run_ids`` in ``tbl`` become ``data`` (rows of those runs), in one snapshot planned on
    ``tbl``'s current one; ``CommitFailedException`` if another writer committed since (refresh, call
    again). Rows of other runs, rows without a run id included, stay as they are."""
    import pyarrow as pa
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.expressions import In
    from pyiceberg.io.pyarrow import _dataframe_to_data_files  # what Table.overwrite writes files with

    ids = pa.array(sorted(set(run_ids)), pa.string())
    plan = _plan(tbl, ids)
    if plan is None:  # rows deleted by another engine's delete files: pyiceberg's plan knows them (slower)
        with tbl.transaction() as tx:
            tx.overwrite(data, overwrite_filter=In("run_id", ids.to_pylist()))
        return
    dropped, kept = plan
    if not dropped and not data.num_rows:
        return
    rows = pa.concat_tables([data, *(k.select(data.schema.names).cast(data.schema) for k in kept)])
    written: list[str] = []
    try:
        with tbl.transaction() as tx, tx.update_snapshot().overwrite() as overwrite:
            for f in dropped:
                overwrite.delete_data_file(f)
            for f in _dataframe_to_data_files(table_metadata=tx.table_metadata, df=rows, io=tbl.io,
                                              write_uuid=overwrite.commit_uuid):
                written.append(f.file_path)
                overwrite.append_data_file(f)
    except (CommitFailedException, ValidationException):
        for path in written:  # the commit did not land (what these two say): nothing refers to them
            tbl.io.delete(path)
        raise


def _plan(tbl: Table, ids: pa.Array) -> tuple[list[DataFile], list[pa.Table]] | None:
    """The data files of ``tbl``'s current snapshot that hold rows of ``ids``, and the rows of other runs
    those files hold; None if the snapshot has delete files (a file's rows are not all live)."""
    import pyarrow.compute as pc
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    current = tbl.metadata.current_snapshot()
    tasks = list(tbl.scan(snapshot_id=current.snapshot_id).plan_files()) if current else []
    if any(t.delete_files for t in tasks):
        return None
    schema = tbl.metadata.schema()
    run_ids = schema.select("run_id")
    dropped: list[DataFile] = []
    kept: list[pa.Table] = []
    for task in tasks:
        runs = ArrowScan(tbl.metadata, tbl.io, run_ids, AlwaysTrue()).to_table([task])["run_id"]
        hits = pc.sum(pc.is_in(runs, value_set=ids)).as_py() or 0  # a null run id is not in ids: kept
        if not hits:
            continue
        dropped.append(task.file)
        if hits < len(runs):  # both kinds in one file: the other runs' rows are written again
            rows = ArrowScan(tbl.metadata, tbl.io, schema, AlwaysTrue()).to_table([task])
            kept.append(rows.filter(pc.invert(pc.is_in(rows.column("run_id"), value_set=ids))))
    return dropped, kept
