"""The store: exact schema after migrating, refusal of files it cannot read, segments absorbed once."""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from looptrace.tracer.store import SCHEMA_VERSION, SegmentWriter, Store, StoreError
from looptrace.tracer.store import migrations
from looptrace.tracer.store.migrations import migrate

from .conftest import PYTHON, python_env, query

_ROLLUP_COLUMNS = ["runs", "unpriced_runs", "input_tokens", "output_tokens", "tokens", "cost_usd"]
EXPECTED_VIEWS = {
    "runs": [
        "run_id", "parent_run_id", "source", "agent", "task", "model", "status", "started_at", "ended_at",
        "n_steps", "input_tokens", "output_tokens", "cost_usd", "n_llm_calls", "answer", "error", "strategy",
        "replay_of", "forked_from", "fork_step", "last_seen_at", "trace_id",
    ],
    "steps": [
        "run_id", "step", "call_index", "started_at", "ended_at", "thought", "tool", "args", "observation",
        "observation_bytes", "is_error", "error_type", "tool_call_id", "action_key", "progress_key", "near_key",
        "input_tokens", "output_tokens",
        "context_tokens", "cost_usd", "events",
    ],
    "tool_calls": [
        "run_id", "step", "call_index", "tool_call_id", "tool", "args", "action_key", "progress_key", "near_key",
        "observation",
        "observation_bytes", "is_error", "error_type", "started_at", "ended_at", "duration_ms",
    ],
    "llm_calls": [
        "run_id", "step", "call_id", "base_call_id", "provider", "model", "response_model", "started_at",
        "ended_at", "latency_ms", "params", "system_sha", "tools_sha", "messages_keep", "request_sha",
        "stop_reason", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
        "cost_usd", "retries", "error",
    ],
    "run_usage": ["run_id", "agent", "model", "day", "input_tokens", "output_tokens", "cost_usd"],
    "usage_by_agent": ["agent", *_ROLLUP_COLUMNS],
    "usage_by_model": ["model", *_ROLLUP_COLUMNS],
    "usage_by_day": ["day", *_ROLLUP_COLUMNS],
    "redactions": ["run_id", "step", "record", "field", "rule", "n", "recorded_at"],
    "open_spans": ["trace_id", "span_id", "parent_span_id", "name", "kind", "start_time", "end_time", "status_code",
                   "status_message", "attributes", "events", "resource", "scope", "received_at"],
}
EXPECTED_TABLES = {
    "schema_migrations", "spans", "run_records", "step_records", "tool_call_records", "llm_call_records",
    "diagnoses", "writer_stats", "absorbed_segments", "export_drops",
    "redaction_records", "received_spans", "log_records", "received_logs",
    "live_traces", "live_run_records", "live_step_records", "live_tool_call_records", "live_llm_call_records",
}


def _columns(conn: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position", [name]
    ).fetchall()]


def test_migrating_an_empty_file_gives_the_documented_schema(db: Path) -> None:
    Store(db).compact()
    conn = duckdb.connect(str(db), read_only=True)
    kinds = dict(conn.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    assert {n for n, k in kinds.items() if k == "BASE TABLE"} == EXPECTED_TABLES
    assert {n for n, k in kinds.items() if k == "VIEW"} == set(EXPECTED_VIEWS)
    for view, columns in EXPECTED_VIEWS.items():
        assert _columns(conn, view) == columns, view
    assert _columns(conn, "diagnoses")[:6] == ["run_id", "label", "is_primary", "first_step", "last_step", "evidence"]
    assert conn.execute("SELECT version, name FROM schema_migrations ORDER BY 1").fetchall() == [
        (1, "initial"), (2, "run_totals"), (3, "export_drops"), (4, "action_key"),
        (5, "redaction_manifest"), (6, "received_spans"), (7, "outcome_keys"), (8, "live_previews"), (9, "messages_drop"),
        (10, "log_records")]
    assert _columns(conn, "run_records")[-3:] == ["input_tokens", "output_tokens", "cost_usd"]
    for table in ("run_records", "step_records", "tool_call_records", "llm_call_records"):  # a preview's rows
        assert _columns(conn, f"live_{table}") == [*_columns(conn, table), "live_trace_id", "live_revision"]
    assert _columns(conn, "live_traces") == ["trace_id", "revision", "open"]
    conn.close()
    conn = duckdb.connect(str(db))
    assert migrate(conn) == 0  # idempotent: a second open applies nothing
    conn.close()


def test_every_documented_column_is_in_docs() -> None:
    doc = (Path(__file__).parent.parent / "docs" / "schema.md").read_text()
    for view, columns in EXPECTED_VIEWS.items():
        assert f"## `{view}`" in doc
        for column in columns:
            assert f"`{column}`" in doc, f"{view}.{column} undocumented"


def test_a_store_from_a_newer_schema_is_refused_untouched(db: Path) -> None:
    Store(db).compact()
    conn = duckdb.connect(str(db))
    conn.execute("INSERT INTO schema_migrations VALUES (?, 'future', now())", [SCHEMA_VERSION + 1])
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreError, match="newer looptrace"):
        Store(db).compact()
    with pytest.raises(StoreError, match="newer looptrace"):
        with Store(db).reader():
            pass
    assert db.read_bytes() == before


def test_a_file_that_is_not_a_store_is_refused_untouched(db: Path) -> None:
    db.write_bytes(b"this is not a database\n" * 100)
    with pytest.raises(StoreError) as err:
        Store(db).compact()
    assert str(db) in str(err.value) and "not changed" in str(err.value)
    assert db.read_bytes() == b"this is not a database\n" * 100


def _row(run_id: str) -> dict[str, object]:
    now = datetime(2026, 1, 1)
    return {"run_id": run_id, "recorded_at": now, "started_at": now, "agent": "a"}


def test_a_segment_is_absorbed_exactly_once(db: Path, tmp_path: Path) -> None:
    writer = SegmentWriter(db)
    name = writer.write({"run_records": [_row("r1")]})
    assert name
    saved = tmp_path / "saved"
    shutil.copytree(writer.dir / name, saved)
    assert Store(db).compact() == 1
    assert not (writer.dir / name).exists()
    # A compaction that committed but died before removing the folder leaves it behind:
    shutil.copytree(saved, writer.dir / name)
    assert Store(db).compact() == 0
    assert not (writer.dir / name).exists()
    assert query(db, "SELECT count(*) FROM run_records") == [(1,)]


def test_absorbed_segments_leave_readers_sight_at_once_and_are_deleted_after(db: Path) -> None:
    writer = SegmentWriter(db)
    names = [writer.write({"run_records": [_row(f"r{i}")]}) for i in range(3)]
    # What a process that exited mid-deletion left in the trash: deleted by the next compaction.
    (writer.dir / ".absorbed" / "left-over").mkdir(parents=True)
    assert Store(db).compact() == 3
    assert not any((writer.dir / n).exists() for n in names if n)
    deadline = time.monotonic() + 10
    while list((writer.dir / ".absorbed").iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list((writer.dir / ".absorbed").iterdir()) == []
    assert query(db, "SELECT count(*) FROM runs") == [(3,)]


def test_views_are_recreated_only_when_they_are_not_this_versions(db: Path) -> None:
    Store(db).compact()
    with duckdb.connect(str(db)) as conn:
        marks = conn.execute("SELECT view_name, comment FROM duckdb_views() WHERE NOT internal").fetchall()
        conn.execute("CREATE OR REPLACE VIEW runs AS SELECT 1 AS stale")  # as an older looptrace left it
    assert {c for _, c in marks} == {migrations.VIEWS_MARK} and len(marks) == len(migrations.VIEW_NAMES)
    Store(db).compact()
    with duckdb.connect(str(db), read_only=True) as conn:  # the file's own views, as the DuckDB CLI sees them
        columns = [c for c, *_ in conn.execute("DESCRIBE runs").fetchall()]
    assert "stale" not in columns and "run_id" in columns


def test_an_unreadable_segment_is_set_aside_and_the_rest_absorbed(db: Path) -> None:
    writer = SegmentWriter(db)
    writer.write({"run_records": [_row("good1")]})
    bad = writer.write({"run_records": [_row("bad")]})
    writer.write({"run_records": [_row("good2")]})
    assert bad
    (writer.dir / bad / "run_records.parquet").write_bytes(b"PAR1 garbage")
    assert Store(db).compact() == 2
    assert (writer.dir / "quarantine" / bad / "run_records.parquet").exists()
    assert query(db, "SELECT run_id FROM run_records ORDER BY 1") == [("good1",), ("good2",)]


def test_a_temporary_segment_of_a_killed_writer_is_never_read(db: Path) -> None:
    writer = SegmentWriter(db)
    writer.write({"run_records": [_row("r1")]})
    (writer.dir / ".tmp-123-1-000001").mkdir()
    (writer.dir / ".tmp-123-1-000001" / "run_records.parquet").write_bytes(b"half written")
    assert query(db, "SELECT run_id FROM runs") == [("r1",)]


def test_readers_see_pending_segments_and_wait_out_a_short_exclusive_hold(db: Path) -> None:
    Store(db).compact()
    holder = subprocess.Popen(
        [PYTHON, "-c", f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('held', flush=True); "
         "time.sleep(1.5)"],
        stdout=subprocess.PIPE, env=python_env(), text=True,
    )
    assert holder.stdout and holder.stdout.readline().strip() == "held"
    SegmentWriter(db).write({"run_records": [_row("while-held")]})
    started = time.monotonic()
    assert query(db, "SELECT run_id, status FROM runs") == [("while-held", "incomplete")]
    assert time.monotonic() - started < 10
    holder.wait(10)


def test_a_version_1_store_is_migrated_in_place_keeping_its_rows(db: Path) -> None:
    from looptrace.tracer.store.migrations import MIGRATIONS
    from looptrace.tracer.store.tables import SCHEMA_MIGRATIONS

    conn = duckdb.connect(str(db))
    conn.execute(SCHEMA_MIGRATIONS)
    version, name, step = MIGRATIONS[0]
    step(conn)
    conn.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
    conn.execute("INSERT INTO run_records (run_id, recorded_at, agent, started_at, ended_at, status) "
                 "VALUES ('old', now(), 'a', now(), now(), 'ok')")
    conn.close()
    assert query(db, "SELECT run_id, status, input_tokens FROM runs") == [("old", "ok", None)]  # unknown, not 0
    conn = duckdb.connect(str(db), read_only=True)
    assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (SCHEMA_VERSION,)
    conn.close()


def test_a_version_8_store_keeps_its_previews_through_migration_9(db: Path) -> None:
    """Migration 9 rebuilds ``live_llm_call_records`` to keep the documented column order: the preview
    rows it holds must come through, with the new column NULL."""
    from looptrace.tracer.store.migrations import MIGRATIONS
    from looptrace.tracer.store.tables import SCHEMA_MIGRATIONS

    conn = duckdb.connect(str(db))
    conn.execute(SCHEMA_MIGRATIONS)
    for version, name, step in MIGRATIONS[:8]:
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
    conn.execute("INSERT INTO live_llm_call_records (run_id, step, call_id, messages_keep, live_trace_id, "
                 "live_revision) VALUES ('r', 1, 'c', 3, 't', 7)")
    conn.close()
    Store(db).compact()
    assert query(db, "SELECT call_id, messages_keep, messages_drop, live_trace_id, live_revision "
                     "FROM live_llm_call_records") == [("c", 3, None, "t", 7)]
