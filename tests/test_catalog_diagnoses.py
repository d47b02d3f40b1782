"""The analyzer's one write to a catalog, ``CatalogStore.replace_diagnoses``, with another writer at work.

``replace_diagnoses(ids, rows)`` makes the diagnoses of the runs ``ids`` exactly ``rows`` and leaves
every other run's alone. It plans its overwrite on the table's snapshot as it reads it (which data
files hold those runs), so the hard moment is another writer committing between that read and this
commit: its diagnoses of other runs must all survive, and no run may end up with two writers' rows.
Each test runs on a SQLite catalog and on a real PostgreSQL one (``conftest.postgres``); the other
writer is a second ``CatalogStore`` (its own catalog connection) that commits, for real, at the moment
this writer's commit reaches the catalog: the only thing the test arranges is when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import pytest

from looptrace.tracer.store.iceberg import CatalogStore
from looptrace.tracer.store.iceberg.layout import iceberg_schema, identifier, partition_spec
from looptrace.tracer.store.iceberg.session import local_path
from looptrace.tracer.store.segments import arrow_schema

# The catalog fixtures: each test on SQLite and on PostgreSQL.
from .test_catalog import NAME, catalog, catalog_env, catalog_uri  # noqa: F401

pytest.importorskip("pyiceberg")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _rows(run_ids: Sequence[str], label: str, per_run: int = 2) -> Any:
    """Diagnoses of ``run_ids`` (``per_run`` rows each, the first primary), all labelled ``label``."""
    at = datetime(2026, 12, 5, 3, 0)
    return pa.Table.from_pylist(
        [{"run_id": r, "label": label, "is_primary": i == 0, "first_step": i + 1, "last_step": i + 2,
          "evidence": "{}", "explanation": f"{label} {r} {i}", "analyzed_at": at}
         for r in run_ids for i in range(per_run)], schema=arrow_schema("diagnoses"))


def _stored() -> Counter[tuple[str, str]]:
    """Every row of the diagnoses table as (run_id, label), counted: the raw Iceberg table, duplicates
    and runs unknown to ``run_records`` included (a reader session would hide those)."""
    table = CatalogStore(NAME).table("diagnoses")
    assert table is not None
    rows = table.scan(selected_fields=("run_id", "label")).to_arrow().to_pylist()
    return Counter((r["run_id"], r["label"]) for r in rows)


def _when_committing(store: CatalogStore, other: Callable[[], None],
                     monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Run ``other`` (another writer's commits) when ``store`` first commits a snapshot, before that
    commit reaches the catalog; the returned list counts ``store``'s snapshot commits."""
    from pyiceberg.table.update import AddSnapshotUpdate

    catalog = store.catalog
    commit = catalog.commit_table
    commits: list[int] = []

    def commit_table(table: Any, requirements: Any, updates: Any) -> Any:
        if any(isinstance(u, AddSnapshotUpdate) for u in updates):
            commits.append(1)
            if len(commits) == 1:
                other()
        return commit(table, requirements, updates)

    monkeypatch.setattr(catalog, "commit_table", commit_table)
    return commits


OURS = [f"run-{i:02d}" for i in range(12)]  # spread over most of the 16 buckets
CHANGED = ["run-10", "run-11"]  # analysed before; the other writer changes them, this one leaves them
NEW = [f"new-{i:02d}" for i in range(6)]  # runs the other writer analyses for the first time
BOTH_NEW = ["both-00"]  # a run both analyse for the first time (a receiver's round and an analyze)
MINE = [r for r in OURS if r not in CHANGED] + BOTH_NEW
# What the other writer commits meanwhile, and which runs end with its rows.
MEANWHILE = {
    # Only new files: nothing this writer planned to drop is touched.
    "adds": ([NEW + BOTH_NEW], NEW),
    # It rewrites files this writer planned to drop: diagnoses of other runs, then of runs both replace.
    "changes": ([NEW + CHANGED, [MINE[0], *BOTH_NEW]], NEW + CHANGED),
}


# Under snapshot isolation pyiceberg does not check a retried commit against files added meanwhile
# (serializable, Iceberg's default, does): "adds" on it fails if pyiceberg retries a plan of this writer.
@pytest.mark.parametrize(("meanwhile", "isolation"),
                         [("adds", "serializable"), ("adds", "snapshot"), ("changes", "serializable")])
def test_another_writers_diagnoses_committed_between_the_read_and_the_commit_are_kept(
    catalog: dict[str, str], monkeypatch: pytest.MonkeyPatch, meanwhile: str, isolation: str  # noqa: F811
) -> None:
    """Whatever the table's isolation level: pyiceberg checks a commit it retries against what others
    committed meanwhile by it (serializable, Iceberg's default, checks more than snapshot)."""
    first = CatalogStore(NAME)
    first.replace_diagnoses(OURS, _rows(OURS, "before"))
    table = first.table("diagnoses")
    assert table is not None
    with table.transaction() as tx:
        tx.set_properties({f"write.{op}.isolation-level": isolation for op in ("delete", "update")})
    commits_of_theirs, theirs = MEANWHILE[meanwhile]
    other = CatalogStore(NAME)  # a second writer: a catalog connection and table objects of its own

    def commit_theirs() -> None:
        for runs in commits_of_theirs:
            other.replace_diagnoses(runs, _rows(runs, "theirs"))

    writer = CatalogStore(NAME)
    commits = _when_committing(writer, commit_theirs, monkeypatch)
    writer.replace_diagnoses(MINE, _rows(MINE, "mine"))

    assert len(commits) >= 2, "planned before the other writer's commits, the first commit had to fail"
    untouched = [r for r in OURS if r not in MINE and r not in theirs]
    expected = Counter({**{(r, "before"): 2 for r in untouched}, **{(r, "theirs"): 2 for r in theirs},
                        **{(r, "mine"): 2 for r in MINE}})
    assert _stored() == expected  # theirs all kept, each run's rows from one writer, none twice


def test_a_table_made_by_an_earlier_looptrace_is_replaced_as_safely(
    catalog: dict[str, str], monkeypatch: pytest.MonkeyPatch  # noqa: F811 - the fixture
) -> None:
    """Catalogs made before let pyiceberg retry the diagnoses table's commits itself (50 times): the
    first replace after an upgrade must not depend on that (snapshot isolation: nothing else saves it)."""
    store = CatalogStore(NAME)
    store.catalog.create_namespace_if_not_exists("looptrace")
    schema = iceberg_schema(arrow_schema("diagnoses"))
    store.catalog.create_table(identifier("diagnoses"), schema=schema, partition_spec=partition_spec(schema),
                               properties={"commit.retry.num-retries": "50",
                                           "write.delete.isolation-level": "snapshot",
                                           "write.update.isolation-level": "snapshot"})
    store.replace_diagnoses(OURS, _rows(OURS, "before"))
    other = CatalogStore(NAME)
    writer = CatalogStore(NAME)
    theirs = NEW + BOTH_NEW
    commits = _when_committing(writer, lambda: other.replace_diagnoses(theirs, _rows(theirs, "theirs")),
                               monkeypatch)
    writer.replace_diagnoses(OURS + BOTH_NEW, _rows(OURS + BOTH_NEW, "mine", per_run=1))

    assert len(commits) >= 2
    expected = Counter({**{(r, "mine"): 1 for r in OURS + BOTH_NEW}, **{(r, "theirs"): 2 for r in NEW}})
    assert _stored() == expected


def test_replacing_some_runs_keeps_the_others_rows_in_the_same_files(
    catalog: dict[str, str],  # noqa: F811 - the fixture
) -> None:
    """Without a race: runs not named keep their rows, also where a data file holds both kinds."""
    runs = [f"run-{i:02d}" for i in range(40)]  # 16 buckets: files of several runs
    again = runs[::3]
    store = CatalogStore(NAME)
    store.replace_diagnoses(runs, _rows(runs, "before"))
    table = store.table("diagnoses")
    assert table is not None
    in_files = [set(pq.read_table(local_path(t.file.file_path), columns=["run_id"])["run_id"].to_pylist())
                for t in table.scan().plan_files()]
    assert any(f & set(again) and f - set(again) for f in in_files), "a file holding both kinds of run"
    store.replace_diagnoses(again, _rows(again, "again", per_run=3))
    store.replace_diagnoses([], _rows([], "none"))
    expected = Counter({(r, "before"): 2 for r in runs if r not in again})
    expected.update({(r, "again"): 3 for r in again})
    assert _stored() == expected
