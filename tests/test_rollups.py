"""Roll-up views: tokens and cost by agent, model and day, with an unknown cost kept NULL (not 0)."""

from __future__ import annotations

from pathlib import Path

from looptrace.tracer.store import Store

from .conftest import query

_RUNS = """
INSERT INTO run_records (run_id, recorded_at, source, agent, model, status, started_at, ended_at,
                         input_tokens, output_tokens, cost_usd)
VALUES ('a1', TIMESTAMP '2026-11-01 10:00', 'test', 'alpha', 'priced', 'ok',
        TIMESTAMP '2026-11-01 10:00', TIMESTAMP '2026-11-01 10:05', 100, 10, 0.5),
       ('a2', TIMESTAMP '2026-11-02 10:00', 'test', 'alpha', 'free', 'ok',
        TIMESTAMP '2026-11-02 10:00', TIMESTAMP '2026-11-02 10:05', 200, 20, 0.0),
       ('b1', TIMESTAMP '2026-11-02 11:00', 'test', 'beta', 'unknown-model', 'ok',
        TIMESTAMP '2026-11-02 11:00', TIMESTAMP '2026-11-02 11:05', 300, 30, NULL)
"""


def _store(db: Path) -> Path:
    with Store(db).writer() as conn:
        conn.execute(_RUNS)
    return db


def test_usage_by_agent_sums_known_costs_and_counts_unknown_ones(db: Path) -> None:
    rows = query(_store(db), "SELECT agent, runs, unpriced_runs, input_tokens, output_tokens, tokens, cost_usd "
                             "FROM usage_by_agent ORDER BY agent")
    assert rows == [("alpha", 2, 0, 300, 30, 330, 0.5), ("beta", 1, 1, 300, 30, 330, None)]


def test_usage_by_model_keeps_free_apart_from_unknown(db: Path) -> None:
    rows = dict(query(_store(db), "SELECT model, cost_usd FROM usage_by_model"))
    assert rows == {"priced": 0.5, "free": 0.0, "unknown-model": None}


def test_usage_by_day_groups_by_the_start_date(db: Path) -> None:
    rows = query(_store(db), "SELECT CAST(day AS VARCHAR), runs, tokens, cost_usd FROM usage_by_day ORDER BY day")
    assert rows == [("2026-11-01", 1, 110, 0.5), ("2026-11-02", 2, 550, 0.0)]
