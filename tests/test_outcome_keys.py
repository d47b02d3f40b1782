"""Outcome keys at write time (schema version 7): the sink stores each call's ``progress_key`` and
``near_key``, the migration gives old rows theirs, and the analyzer says the same with or without them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import duckdb

from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.files.importing import write_trajectories
from looptrace.tracer.records.actions import near_observation_key, progress_key
from looptrace.tracer.store import SCHEMA_VERSION, Store
from looptrace.tracer.store.tables import LIVE_TABLES
from looptrace.tracer.store.views import VIEW_NAMES

from .test_progress import CASES, run

_KEYS = "SELECT observation, progress_key, near_key FROM tool_call_records ORDER BY run_id, step, call_index"


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "s.duckdb")
    # One file per case: a run's id comes from its source.
    write_trajectories(store, [replace(run(steps, "max_iters"), source=f"case{i}.json")
                               for i, (steps, _) in enumerate(CASES.values())])
    store.compact()
    return store


def _diagnoses(store: Store) -> dict[str, list[tuple[object, ...]]]:
    return {r.run_id: [(d.label, d.is_primary, d.first_step, d.last_step, d.explanation, d.evidence)
                       for d in r.diagnoses] for r in analyze_store(store, write=False)}


def test_the_sink_stores_the_keys_of_the_redacted_observation(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.reader(locked_down=False) as conn:
        rows = conn.execute(_KEYS).fetchall()
    assert len(rows) == sum(len(steps) for steps, _ in CASES.values())
    assert all(p == progress_key(o) and n == near_observation_key(o) and p is not None for o, p, n in rows)
    assert len({p for _, p, _ in rows}) > len({n for _, _, n in rows})  # near-same merges more


def test_the_migration_keys_rows_stored_before_it(tmp_path: Path) -> None:
    store = _store(tmp_path)
    with store.reader(locked_down=False) as conn:
        written = conn.execute(_KEYS).fetchall()
    # Make the file what version 6 left: no key columns, no later migration (8 made the live tables,
    # 9 the messages_drop column, 10 the log-record tables).
    conn = duckdb.connect(str(store.path))
    for view in VIEW_NAMES:
        conn.execute(f"DROP VIEW IF EXISTS {view}")
    for table in ("live_traces", *LIVE_TABLES.values(), "log_records", "received_logs"):
        conn.execute(f"DROP TABLE {table}")
    conn.execute("ALTER TABLE tool_call_records DROP COLUMN progress_key")
    conn.execute("ALTER TABLE tool_call_records DROP COLUMN near_key")
    conn.execute("ALTER TABLE llm_call_records DROP COLUMN messages_drop")
    conn.execute("DELETE FROM schema_migrations WHERE version >= 7")
    conn.close()
    store.compact()  # opening for writing migrates
    with store.reader(locked_down=False) as conn:
        assert conn.execute(_KEYS).fetchall() == written
        assert conn.execute("SELECT max(version) FROM store.schema_migrations").fetchone() == (SCHEMA_VERSION,)


def test_the_analyzer_computes_missing_keys_itself(tmp_path: Path) -> None:
    store = _store(tmp_path)
    keyed = _diagnoses(store)
    assert {ds[0][0] for ds in keyed.values()} == {"stagnation", "cap_hit"}
    with store.writer() as conn:  # rows written by hand or by a bulk loader that left the keys out
        conn.execute("UPDATE tool_call_records SET progress_key = NULL, near_key = NULL")
    assert _diagnoses(store) == keyed
