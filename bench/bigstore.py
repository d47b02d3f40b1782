"""A generated store of many runs for the analyzer and viewer benchmarks, made with SQL in seconds.

Run kinds, by ``i % 20``: 0-1 stagnate (one action repeated), 2-3 hit the step cap with varied
actions, 4 blow up their context, 5 call unknown tools half the time, the rest are healthy.
"""

from __future__ import annotations

from pathlib import Path

from looptrace.tracer.store import Store

__all__ = ["make_big_store"]

_RUNS = """
INSERT INTO run_records (run_id, recorded_at, source, agent, task, model, status, started_at, ended_at)
SELECT 'run' || lpad(i::VARCHAR, 6, '0'), TIMESTAMP '2026-11-01' + INTERVAL (i) MINUTE, 'bench',
       'agent' || (i % 5), 'generated task number ' || i || ' about file ' || (i % 97) || '.py',
       'claude-sonnet-4-5',
       CASE WHEN i % 20 IN (2, 3) THEN 'max_iters' WHEN i % 20 = 4 THEN 'context_overflow' ELSE 'ok' END,
       TIMESTAMP '2026-11-01' + INTERVAL (i) MINUTE, TIMESTAMP '2026-11-01' + INTERVAL (i) MINUTE + INTERVAL 5 MINUTE
FROM range(?) t(i)
"""

_STEPS = """
INSERT INTO step_records (run_id, step, started_at, ended_at, thought, input_tokens, output_tokens, context_tokens,
                          cost_usd)
SELECT 'run' || lpad((i // ?)::VARCHAR, 6, '0'), (i % ?) + 1,
       TIMESTAMP '2026-11-01' + INTERVAL (i) SECOND, TIMESTAMP '2026-11-01' + INTERVAL (i) SECOND,
       'thinking about step ' || (i % ?), 1000 + (i % ?) * 50, 80,
       CASE WHEN (i // ?) % 20 = 4 THEN 2000 * ((i % ?) + 1) ELSE 1000 + (i % ?) * 50 END, 0.004
FROM range(?) t(i)
"""

_CALLS = """
INSERT INTO tool_call_records (run_id, step, call_index, tool_call_id, tool, args, observation, observation_bytes,
                               is_error, error_type)
SELECT 'run' || lpad((i // ?)::VARCHAR, 6, '0'), (i % ?) + 1, 0, 'toolu_' || i,
       CASE WHEN (i // ?) % 20 = 5 AND i % 2 = 0 THEN 'open_file' ELSE 'read_file' END,
       CASE WHEN (i // ?) % 20 IN (0, 1) AND i % ? > 10 THEN '{"path": "same.py"}'
            ELSE '{"path": "src/f' || (i % ?) || '.py"}' END,
       'contents of file ' || (i % ?) || ' ' || repeat('x', 40),
       60,
       (i // ?) % 20 = 5 AND i % 2 = 0,
       CASE WHEN (i // ?) % 20 = 5 AND i % 2 = 0 THEN 'tool_not_found' END
FROM range(?) t(i)
"""


def make_big_store(path: Path, runs: int = 10_000, steps_per_run: int = 100) -> Path:
    store = Store(path)
    n = runs * steps_per_run
    k = steps_per_run
    with store.writer() as conn:
        conn.execute(_RUNS, [runs])
        conn.execute(_STEPS, [k, k, k, k, k, k, k, n])
        conn.execute(_CALLS, [k, k, k, k, k, k, k, k, k, n])
        conn.execute("CHECKPOINT")
    return path
