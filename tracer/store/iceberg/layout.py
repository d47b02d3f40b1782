"""How the store's tables look as Iceberg tables: names, schemas, the partition spec.

The Iceberg schema of a table is derived from the DuckDB store's own (``segments.arrow_schema``,
itself read from a freshly migrated database), so the two backends cannot disagree; a column a
later migration adds is added to an existing Iceberg table by name (``missing_columns``).

Every table with a ``run_id`` is partitioned by ``bucket(PARTITION_BUCKETS, run_id)``: all rows of a
run, in every table, share one partition number, so one partition is a unit of work that needs no
other (the analysis fans out one task per partition, no shuffle). Iceberg's bucket transform is the
spec's Murmur3 hash, so Spark and Trino prune by it too. Rows without a run (spans of a trace that
never became a run) land in the null partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tables import LIVE_TABLES, RECORD_TABLES

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.partitioning import PartitionSpec
    from pyiceberg.schema import Schema

__all__ = ["NAMESPACE", "PARTITION_BUCKETS", "CATALOG_TABLES", "PARTITION_FIELD", "identifier", "iceberg_schema",
           "partition_spec", "missing_columns"]

NAMESPACE = "looptrace"
# 16 partitions: enough to spread the analysis over a small cluster's cores; each holds 1/16 of the
# runs. Fixed per table at creation (Iceberg can evolve a spec, but old files keep theirs).
PARTITION_BUCKETS = 16
PARTITION_FIELD = "run_bucket"
# The store's record tables. writer_stats is a DuckDB-store process counter, received_spans the
# receiver's journal of open traces (keyed by trace, no run to partition by) and the live tables its
# previews of them (rewritten every second: not what an Iceberg table is for): a catalog has none.
_NOT_IN_A_CATALOG = frozenset({"writer_stats", "received_spans", "received_logs", "live_traces", *LIVE_TABLES.values()})
CATALOG_TABLES: tuple[str, ...] = tuple(t for t in RECORD_TABLES if t not in _NOT_IN_A_CATALOG)


def identifier(table: str) -> tuple[str, str]:
    return (NAMESPACE, table)


def _iceberg_type(arrow_type: pa.DataType):  # noqa: ANN202 - a pyiceberg type
    import pyarrow as pa
    from pyiceberg import types as t

    for test, kind in ((pa.types.is_string, t.StringType), (pa.types.is_large_string, t.StringType),
                       (pa.types.is_int32, t.IntegerType), (pa.types.is_int64, t.LongType),
                       (pa.types.is_float64, t.DoubleType), (pa.types.is_boolean, t.BooleanType),
                       (pa.types.is_timestamp, t.TimestampType), (pa.types.is_date32, t.DateType)):
        if test(arrow_type):
            return kind()
    raise TypeError(f"no Iceberg type for the store's Arrow type {arrow_type}")


def iceberg_schema(arrow: pa.Schema) -> Schema:
    """An Iceberg schema with the Arrow schema's columns in order, ids 1..n, every column optional
    (the DuckDB store's NOT NULLs are the writers' promise, not something Iceberg must refuse)."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import NestedField

    return Schema(*(NestedField(field_id=i, name=f.name, field_type=_iceberg_type(f.type), required=False)
                    for i, f in enumerate(arrow, start=1)))


def partition_spec(schema: Schema) -> PartitionSpec:
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
    from pyiceberg.transforms import BucketTransform

    try:
        run_id = schema.find_field("run_id")
    except ValueError:
        return UNPARTITIONED_PARTITION_SPEC
    return PartitionSpec(PartitionField(source_id=run_id.field_id, field_id=1000,
                                        transform=BucketTransform(PARTITION_BUCKETS), name=PARTITION_FIELD))


def missing_columns(have: Schema, want: pa.Schema) -> list[str]:
    """Columns of the store's current schema that an existing Iceberg table lacks."""
    names = {f.name for f in have.fields}
    return [f.name for f in want if f.name not in names]
