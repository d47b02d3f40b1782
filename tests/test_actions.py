"""One action identity: the loop, the analyzer, diff, the viewer and SQL agree on "the same action"."""

from __future__ import annotations

from pathlib import Path

import duckdb

from looptrace.loop.stagnation import signature
from looptrace.replay.analyzer import StepView
from looptrace.tracer.ingest.files.importing import write_trajectories
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
from looptrace.tracer.records.actions import STEP_ACTION_KEY_SQL, call_action, call_key, step_key
from looptrace.tracer.store import Store
from looptrace.tracer.store.migrations import MIGRATIONS, migrate
from looptrace.tracer.store.tables import SCHEMA_MIGRATIONS


def test_key_order_and_json_text_do_not_change_the_action() -> None:
    assert call_key("read", {"a": 1, "b": [1, 2]}) == call_key("read", '{"b": [1, 2], "a": 1}')
    assert call_key("read", {"path": "a.txt"}) != call_key("read", {"path": "b.txt"})
    assert call_key("read", {"path": "a.txt"}) != call_key("cat", {"path": "a.txt"})
    assert call_key(None, {"path": "a.txt"}) is None
    assert call_action("bash", "ls -la") == 'bash "ls -la"'  # not JSON: the text is the argument
    assert step_key([None, None]) is None


def test_loop_analyzer_and_sql_agree(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    calls = [("read", {"path": "a.txt", "n": 1}), ("read", {"n": 1, "path": "a.txt"}), ("write", {"path": "b"})]
    steps = [ImportedStep(step=i + 1, tool=tool, args=args, observation="x") for i, (tool, args) in enumerate(calls)]
    steps.append(ImportedStep(step=4, tool="read", args={"path": "a.txt", "n": 1}, call_index=0))
    steps.append(ImportedStep(step=4, tool="write", args={"path": "b"}, call_index=1))
    steps.append(ImportedStep(step=5, thought="done"))
    write_trajectories(Store(db), [Trajectory(source="t.json", agent="a", status="ok", steps=steps)])

    with Store(db).reader() as conn:
        rows = conn.execute(f"SELECT step, {STEP_ACTION_KEY_SQL} FROM steps GROUP BY step ORDER BY step").fetchall()
        stored = conn.execute("SELECT step, call_index, tool, CAST(args AS VARCHAR), action_key FROM steps "
                              "WHERE tool IS NOT NULL ORDER BY step, call_index").fetchall()
    sql_keys = dict(rows)
    # SQL's step key is step_key over the Python call keys.
    assert sql_keys[1] == step_key([call_key("read", {"path": "a.txt", "n": 1})])
    assert sql_keys[1] == sql_keys[2] != sql_keys[3]
    assert sql_keys[4] == step_key([call_key("read", {"n": 1, "path": "a.txt"}), call_key("write", {"path": "b"})])
    assert sql_keys[5] is None
    # The analyzer's action and the loop's signature see steps 1 and 2 as one action, step 3 as another.
    views = [StepView(step=s, call_index=i, tool=tool, args=args, action_key=key) for s, i, tool, args, key in stored]
    assert views[0].action == views[1].action != views[2].action
    assert StepView(step=1, tool="read", args='{"n":1,"path":"a.txt"}').action == views[0].action
    assert signature("read", {"path": "a.txt", "n": 1}) == signature("read", {"n": 1, "path": "a.txt"})
    assert signature(*calls[0]) == call_action(*calls[0])


def _store_at_version_3(db: Path) -> duckdb.DuckDBPyConnection:
    """An open store file as looptrace wrote it before action keys (schema version 3)."""
    conn = duckdb.connect(str(db))
    conn.execute(SCHEMA_MIGRATIONS)
    for version, name, step in MIGRATIONS[:3]:
        step(conn)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
    return conn


def test_migration_gives_rows_stored_before_it_their_action_key(tmp_path: Path) -> None:
    db = tmp_path / "v3.duckdb"
    conn = _store_at_version_3(db)
    conn.execute("INSERT INTO tool_call_records (run_id, step, call_index, tool, args) VALUES "
                 "('r', 1, 0, 'read', '{\"b\": 2, \"a\": 1}'), ('r', 2, 0, NULL, NULL)")
    assert migrate(conn) == len(MIGRATIONS) - 3
    got = conn.execute("SELECT step, action_key FROM tool_call_records ORDER BY step").fetchall()
    conn.close()
    assert got == [(1, call_key("read", {"a": 1, "b": 2})), (2, None)]


def test_a_busy_old_file_reads_with_the_new_columns_as_null(tmp_path: Path, monkeypatch) -> None:
    db = tmp_path / "v3.duckdb"
    conn = _store_at_version_3(db)
    conn.execute("INSERT INTO tool_call_records (run_id, step, call_index, tool, args) VALUES "
                 "('r', 1, 0, 'read', '{}')")
    conn.close()
    # As a reader that finds the file busy (another process compacting) does: no migration, yet the
    # views bind, with the column the file does not have yet as NULL.
    monkeypatch.setattr(Store, "_try_compact", lambda self, wait: None)
    with Store(db).reader(absorb=False) as session:
        assert session.execute("SELECT tool, action_key FROM steps").fetchall() == [("read", None)]
