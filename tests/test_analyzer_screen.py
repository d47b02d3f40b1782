"""The column screen (replay/analyzer/screen.py) changes the analyzer's time, never its verdicts.

``analyze_store`` screens the whole store in SQL and evaluates in Python only the rules a run may
trip; ``analyze_store(screened=False)`` evaluates every rule on every whole run. Both must return
equal diagnoses (labels, primary, secondary, steps, explanations and evidence), on a seeded random
store built to hit every rule and every way the screen can be wrong, on the bench's generated
store, and (tests/test_corpus.py) on the shared corpus.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pytest

from bench.bulkstore import make_bulk_store
from looptrace.replay.analyzer import DEFAULT_THRESHOLDS, Thresholds, analyze_store
from looptrace.replay.analyzer.analyze import RUNS_SQL
from looptrace.replay.analyzer.rules import FAILURE_LABELS
from looptrace.replay.analyzer.screen import clears, screen
from looptrace.replay.analyzer.views import RunView
from looptrace.tracer.records.actions import call_key, near_observation_key, progress_key
from looptrace.tracer.store import Store

# Low thresholds make the screen's tests true often and put runs right at each threshold; "off"
# turns the repeat rules off (a threshold below 2), which the screen must honour too.
LOW = Thresholds(repeat_min=2, fail_repeat_min=2, cycle_repeats=2, cycle_max_period=4, same_observation_min=2,
                 same_observation_min_bytes=10, near_same_min_bytes=100, context_window=4000, chat_round_limit=6)
OFF = Thresholds(repeat_min=0, fail_repeat_min=1, cycle_repeats=0, same_observation_min=1, context_near=0.5)
THRESHOLDS = [DEFAULT_THRESHOLDS, LOW, OFF]

TOOLS = ["read_file", "grep", "bash", "submit", "edit"]
ARGS = ['{"path": "a.py"}', '{"path": "b.py"}', '{"q": "x"}']
OBSERVATIONS = [
    "the same answer " + "x" * 70, "another answer " + "y" * 70, "ok", None, "",
    "file view, line 10 of 400\n" + "z" * 1200, "file view, line 11 of 400\n" + "z" * 1200,
    "at 12:00:01 the job was at 40%" + "w" * 60, "at 12:00:07 the job was at 40%" + "w" * 60,
    "Traceback (most recent call last):\n  File x\nValueError: bad value",
]
THOUGHTS = [None, "thinking", "Submitted", "exit_cost", "prompt is too long", "Agent got stuck in a loop",
            "Traceback (most recent call last):\nKeyError: 'x'", "TERMINATE", "exit_format", "FINAL ANSWER: 4"]
STATUSES = ["ok", "ok", "ok", "max_iters", "error", "interrupted", "incomplete", "context_overflow", "stagnated",
            "unknown"]
MODELS = ["claude-sonnet-4-5", "gpt-4", "some-unknown-model", None]
ATTRIBUTES = [None, None, None, {"guard": {"thresholds": {"repeat_min": 2, "fail_repeat_min": 2}}},
              {"max_round": 8}, {"context_window": 3000}, {"messages": 6}, {"note": "Submitted"}]

_FAILED = "error: the command timed out after 30 seconds, nothing was written " + "." * 20
# Runs where one rule alone may trip, each at the default threshold (calls: tool, args, observation,
# failed, stored with its action key), so a screen test that missed its rule would clear the run.
SCENARIOS = [
    [("bash", f'{{"c": {i}}}', _FAILED, True, 1) for i in range(3)],  # failing, arguments changing
    [("bash", '{"c": 1}', None, True, 1) for _ in range(3)],  # failing with no error text: the same call
    [("grep", '{"q": 1}', "first " + "a" * 80, False, 1), ("grep", '{"q": 2}', "second " + "b" * 80, False, 1)] * 5,
    # one call, stored with its key and without in turn: its two results alternate (only repeats stall)
    [("read_file", '{"path": "a.py"}', f"contents {i % 2} " + "c" * 80, False, i % 2) for i in range(6)],
    [("read_file", f'{{"path": "{i}.py"}}', "the same contents " + "d" * 80, False, 1) for i in range(5)],
]


def _random_store(path: Path, runs: int, seed: int) -> Store:
    """Runs of 0-24 steps of 0-2 calls each, drawn so streaks, cycles, failures, big contexts, markers,
    end tools (before closing steps with no call, too), guards, limits, unkeyed actions and rows stored
    without outcome keys all occur."""
    rng = random.Random(seed)
    run_rows, step_rows, call_rows = [], [], []
    for r in range(runs):
        run_id = f"r{r:04d}"
        attrs = rng.choice(ATTRIBUTES)
        run_rows.append({"run_id": run_id, "status": rng.choice(STATUSES), "model": rng.choice(MODELS),
                         "answer": rng.choice([None, "42", "Submitted"]),
                         "error": rng.choice([None, None, "RuntimeError: it broke"]),
                         "attributes": None if attrs is None else json.dumps(attrs)})
        period = rng.choice([1, 2, 3])
        pattern = [(rng.choice(TOOLS), rng.choice(ARGS)) for _ in range(period)]
        errors, markers = rng.choice([0.0, 0.0, 0.25]), rng.choice([0.0, 0.0, 0.3])  # clean runs and noisy ones
        context = rng.choice([100, 1000, 20_000])
        steps = rng.randint(0, 24)
        quiet = rng.choice([0, 0, 1, 3, 4])  # closing steps with no call: the last action comes before them
        for step in range(1, steps + 1):
            context += rng.choice([0, 50, 500, 5000])
            step_rows.append({"run_id": run_id, "step": step,
                              "thought": rng.choice(THOUGHTS) if rng.random() < markers else "thinking",
                              "context_tokens": rng.choice([context, context, None, 0]),
                              "input_tokens": rng.choice([None, 100]), "output_tokens": 20,
                              "cost_usd": rng.choice([None, 0.01])})
            for call_index in range(0 if step > steps - quiet else rng.choice([0, 1, 1, 1, 2])):
                tool, args = pattern[step % period] if rng.random() < 0.6 else (rng.choice(TOOLS), rng.choice(ARGS))
                observation = rng.choice(OBSERVATIONS[:3]) if rng.random() < 0.4 else rng.choice(OBSERVATIONS)
                size = None if observation is None else len(observation.encode()) * rng.choice([1, 1, 100])
                error = rng.random() < errors
                keyed = rng.random() < 0.8
                call_rows.append({
                    "run_id": run_id, "step": step, "call_index": call_index, "tool": tool, "args": args,
                    "observation": observation,
                    "observation_bytes": size,
                    "is_error": error if rng.random() < 0.9 else None,
                    "error_type": rng.choice(["tool_not_found", "invalid_arguments", "timeout", None] if error else [None]),
                    "action_key": call_key(tool, args) if rng.random() < 0.97 else None,
                    "progress_key": progress_key(observation) if keyed else None,
                    "near_key": near_observation_key(observation) if keyed and observation is not None else None})
    for n, calls in enumerate(SCENARIOS):
        run_id = f"s{n:02d}"
        run_rows.append({"run_id": run_id, "status": "ok", "model": "claude-sonnet-4-5", "answer": None,
                         "error": None, "attributes": None})
        for step, (tool, args, observation, error, keyed) in enumerate([*calls, ("submit", '{"a": 1}', None, False, 1)],
                                                                       start=1):
            step_rows.append({"run_id": run_id, "step": step, "thought": "thinking", "context_tokens": 100,
                              "input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01})
            call_rows.append({"run_id": run_id, "step": step, "call_index": 0, "tool": tool, "args": args,
                              "observation": observation, "is_error": error,
                              "observation_bytes": None if observation is None else len(observation),
                              "error_type": "timeout" if error else None,
                              "action_key": call_key(tool, args) if keyed else None,
                              "progress_key": progress_key(observation), "near_key": near_observation_key(observation)})
    store = Store(path)
    runs_t, steps_t, calls_t = (pa.Table.from_pylist(rows) for rows in (run_rows, step_rows, call_rows))
    with store.writer() as conn:
        conn.execute("INSERT INTO run_records BY NAME SELECT *, now() AS recorded_at, now() AS started_at FROM runs_t")
        conn.execute("INSERT INTO step_records BY NAME SELECT * FROM steps_t")
        conn.execute("INSERT INTO tool_call_records BY NAME SELECT * FROM calls_t")
    return store


def _screened_like_full(store: Store, t: Thresholds) -> list[str]:
    """Asserts the two evaluations agree; the primary labels."""
    screened = analyze_store(store, thresholds=t, write=False)
    full = analyze_store(store, thresholds=t, write=False, screened=False)
    assert [r.run_id for r in screened] == [r.run_id for r in full]
    for a, b in zip(screened, full):
        assert a == b, (a.run_id, t)
    return [r.primary.label if r.primary else "(none)" for r in full]


def _cleared_counts(store: Store, t: Thresholds) -> tuple[int, int]:
    """(runs the columns clear of every failure rule, runs with some rule cleared and some not)."""
    with store.reader(locked_down=False) as conn:
        facts = screen(conn, t)
        runs = conn.execute(RUNS_SQL.format(where=""))
        cleared = [clears(RunView(r[0], r[1], (), *r[2:]), facts[r[0]], t) for r in runs.fetchall() if r[0] in facts]
    return sum(c == FAILURE_LABELS for c in cleared), sum(bool(c) and c != FAILURE_LABELS for c in cleared)


@pytest.mark.parametrize("t", THRESHOLDS, ids=["default", "low", "off"])
def test_random_store_gives_equal_diagnoses(tmp_path: Path, t: Thresholds) -> None:
    store = _random_store(tmp_path / "random.duckdb", 300, seed=38)
    labels = _screened_like_full(store, t)
    assert len(set(labels)) >= 6, sorted(set(labels))  # the runs reach most verdicts
    whole, partly = _cleared_counts(store, t)
    assert whole > 0 and partly > 0  # both paths ran: fully cleared runs and runs fetched whole


def test_rows_without_runs_and_runs_without_rows(tmp_path: Path) -> None:
    store = _random_store(tmp_path / "edges.duckdb", 30, seed=7)
    with store.writer() as conn:
        conn.execute("INSERT INTO tool_call_records (run_id, step, call_index, tool, args) VALUES "
                     "('orphan', 1, 0, 'bash', '{}'), ('zzz', 3, 0, 'bash', '{}')")
        conn.execute("INSERT INTO run_records (run_id, recorded_at, status) VALUES ('empty', now(), 'ok'), "
                     "('zzz', now(), 'ok')")
    _screened_like_full(store, DEFAULT_THRESHOLDS)


def test_bench_store_gives_equal_diagnoses(tmp_path: Path) -> None:
    store = Store(make_bulk_store(tmp_path / "bench.duckdb", 20_000))
    labels = _screened_like_full(store, DEFAULT_THRESHOLDS)
    # Its "stagnating" runs repeat one action whose results keep changing: progress, not stagnation.
    assert {"ok", "cap_hit", "context_bomb", "hallucinated_tool"} <= set(labels)
    _screened_like_full(store, LOW)
    assert _cleared_counts(store, DEFAULT_THRESHOLDS)[0] >= 100  # the healthy 70% of its 200 runs


def test_a_partition_is_analysed_as_a_store_is(tmp_path: Path) -> None:
    """``analyze --catalog`` (``analyze_partition``, in one process or a Ray task) runs the store's own
    path: the same diagnoses as ``analyze_store``, screened, and a run still ``running`` is skipped
    by both (it used to be diagnosed, as a cap hit or an incomplete run, by the catalog path only)."""
    from looptrace.replay.partitioned import analyze_partition

    store = _random_store(tmp_path / "partition.duckdb", 120, seed=41)
    with store.writer() as conn:
        conn.execute("UPDATE run_records SET status = 'running' WHERE run_id IN ('r0003', 'r0007')")
    with store.reader(locked_down=False) as conn:
        tables = {t: conn.sql(f"SELECT * FROM {t}").to_arrow_table()
                  for t in ("run_records", "step_records", "tool_call_records")}
    for t in (DEFAULT_THRESHOLDS, LOW):
        partition = analyze_partition(tables, t)
        assert partition == analyze_store(store, thresholds=t, write=False)
        assert {"r0003", "r0007"}.isdisjoint(r.run_id for r in partition) and len(partition) > 100
