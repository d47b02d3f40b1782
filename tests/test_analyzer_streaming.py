"""The analyzer streams runs one at a time: its results must equal those of loading every step at once."""

from __future__ import annotations

from pathlib import Path

from looptrace.replay.analyzer import RunView, StepView, diagnose, load_runs
from looptrace.replay.analyzer.analyze import RUNS_SQL, STEPS_SQL, analyze_store
from looptrace.tracer.store import Store


def _all_at_once(store: Store) -> list[RunView]:
    """The loader before streaming: every step of the store fetched whole, grouped in a dict."""
    with store.reader(locked_down=False) as conn:
        runs = conn.execute(RUNS_SQL.format(where="")).fetchall()
        cursor = conn.execute(STEPS_SQL.format(where=""))
        names = [d[0] for d in cursor.description]
        rows = [dict(zip(names, r)) for r in cursor.fetchall()]
    steps: dict[str, list[StepView]] = {}
    for row in rows:
        run_id = row.pop("run_id")
        steps.setdefault(run_id, []).append(StepView(**row))
    return [RunView(r, s, tuple(steps.get(r, ())), m, e, a, at) for r, s, m, e, a, at in runs]


def test_streamed_runs_equal_the_runs_loaded_at_once(demo: Path) -> None:
    expected = _all_at_once(Store(demo))
    # A batch of 7 rows splits runs across Arrow batches: a run's steps must still come out whole.
    with Store(demo).reader(locked_down=False) as conn:
        streamed = list(load_runs(conn, batch_size=7))
    assert [r.run_id for r in streamed] == [r.run_id for r in expected]
    assert sum(len(r.steps) for r in expected) > 7
    assert streamed == expected


def test_streamed_diagnoses_equal_the_old_results(demo: Path) -> None:
    expected = {r.run_id: diagnose(r) for r in _all_at_once(Store(demo))}
    got = {r.run_id: r.diagnoses for r in analyze_store(Store(demo), write=False)}
    assert got == expected
    assert any(d.label != "ok" for ds in got.values() for d in ds)


def test_runs_without_steps_and_steps_without_runs(db: Path) -> None:
    store = Store(db)
    with store.writer() as conn:
        conn.execute("INSERT INTO run_records (run_id, recorded_at, status, started_at, ended_at) VALUES "
                     "('a', now(), 'ok', now(), now()), ('b0', now(), 'ok', now(), now()), "
                     "('c', now(), 'ok', now(), now())")
        conn.execute("INSERT INTO tool_call_records (run_id, step, call_index, tool, args) VALUES "
                     "('a', 1, 0, 't', '{}'), ('b', 1, 0, 'orphan', '{}'), ('c', 1, 0, 'u', '{}'), "
                     "('c', 2, 0, 'u', '{}')")
    with store.reader(locked_down=False) as conn:
        runs = {r.run_id: [s.tool for s in r.steps] for r in load_runs(conn, batch_size=1)}
        only_c = [r.run_id for r in load_runs(conn, ["c"])]
    assert runs == {"a": ["t"], "b0": [], "c": ["u", "u"]}
    assert only_c == ["c"]
