"""A generated store of millions of steps, built the way bulk data arrives: Parquet segments.

Each chunk of runs is written by DuckDB's ``COPY ... TO`` as one segment (a folder holding one
Parquet file per table, as ``SegmentWriter`` lays them out), then ``Store.compact`` absorbs them all:
the same path an import or a busy tracer takes, at a speed that makes 10,000,000 steps a matter of
minutes. Run kinds follow ``bigstore.py``: by ``run % 20``, 0-1 stagnate, 2-3 hit the step cap,
4 blow up their context, 5 call unknown tools half the time, the rest are healthy.
``action_key`` is computed as the sink would (``md5('tool canonical-args')``, records/actions.py), and so
are the outcome keys ``progress_key`` and ``near_key`` (their SQL forms, which agree with the sink's).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb

from looptrace.tracer.records.actions import NEAR_OBSERVATION_KEY_SQL, PROGRESS_KEY_SQL
from looptrace.tracer.store import Store
from looptrace.tracer.store.segments import segments_dir

__all__ = ["make_bulk_store"]

STEPS_PER_RUN = 100
RUNS_PER_SEGMENT = 10_000  # 1,000,000 steps per segment

_RUNS = """
COPY (SELECT 'run' || lpad(r::VARCHAR, 8, '0') AS run_id, TIMESTAMP '2026-11-01' + INTERVAL (r) SECOND AS recorded_at,
             'bench' AS source, 'agent' || (r % 5) AS agent, 'generated task ' || r AS task,
             'claude-sonnet-4-5' AS model,
             CASE WHEN r % 20 IN (2, 3) THEN 'max_iters' WHEN r % 20 = 4 THEN 'context_overflow' ELSE 'ok' END AS status,
             TIMESTAMP '2026-11-01' + INTERVAL (r) SECOND AS started_at,
             TIMESTAMP '2026-11-01' + INTERVAL (r) SECOND + INTERVAL 5 MINUTE AS ended_at
      FROM range($lo, $hi) t(r)) TO '{path}' (FORMAT parquet, COMPRESSION zstd)
"""

_STEPS = """
COPY (SELECT 'run' || lpad((i // {k})::VARCHAR, 8, '0') AS run_id, (i % {k})::INTEGER + 1 AS step,
             TIMESTAMP '2026-11-01' + INTERVAL (i) SECOND AS started_at,
             TIMESTAMP '2026-11-01' + INTERVAL (i) SECOND AS ended_at,
             'thinking about step ' || (i % {k}) AS thought, 1000 + (i % {k}) * 50 AS input_tokens, 80 AS output_tokens,
             CASE WHEN (i // {k}) % 20 = 4 THEN 2000 * ((i % {k}) + 1) ELSE 1000 + (i % {k}) * 50 END AS context_tokens,
             0.004 AS cost_usd
      FROM range($lo * {k}, $hi * {k}) t(i)) TO '{path}' (FORMAT parquet, COMPRESSION zstd)
"""

_CALLS = """
COPY (SELECT run_id, step, 0 AS call_index, 'toolu_' || i AS tool_call_id, tool, args,
             md5(tool || ' ' || args) AS action_key, {progress_key} AS progress_key, {near_key} AS near_key,
             observation, 60 AS observation_bytes,
             bad AS is_error, CASE WHEN bad THEN 'tool_not_found' END AS error_type
      FROM (SELECT i, 'run' || lpad((i // {k})::VARCHAR, 8, '0') AS run_id, (i % {k})::INTEGER + 1 AS step,
                   (i // {k}) % 20 = 5 AND i % 2 = 0 AS bad,
                   CASE WHEN bad THEN 'open_file' ELSE 'read_file' END AS tool,
                   CASE WHEN (i // {k}) % 20 IN (0, 1) AND i % {k} > 10 THEN '{{"path":"same.py"}}'
                        ELSE '{{"path":"src/f' || (i % {k}) || '.py"}}' END AS args,
                   'contents of file ' || (i % {k}) || ' ' || repeat('x', 40) AS observation
            FROM range($lo * {k}, $hi * {k}) t(i))) TO '{path}' (FORMAT parquet, COMPRESSION zstd)
"""


def make_bulk_store(path: Path, steps: int, *, steps_per_run: int = STEPS_PER_RUN) -> Path:
    """A store at ``path`` holding ``steps`` steps (one tool call each) in runs of ``steps_per_run``."""
    runs = max(1, steps // steps_per_run)
    folder = segments_dir(path)
    conn = duckdb.connect()
    try:
        conn.execute("SET preserve_insertion_order = false")
        conn.execute("SET enable_progress_bar = false")
        for seq, lo in enumerate(range(0, runs, RUNS_PER_SEGMENT)):
            hi = min(runs, lo + RUNS_PER_SEGMENT)
            tmp = folder / f".tmp-{seq}"
            tmp.mkdir(parents=True)
            for table, sql in (("run_records", _RUNS), ("step_records", _STEPS), ("tool_call_records", _CALLS)):
                target = (tmp / f"{table}.parquet").as_posix().replace("'", "''")
                conn.execute(sql.format(k=steps_per_run, path=target, progress_key=PROGRESS_KEY_SQL,
                                        near_key=NEAR_OBSERVATION_KEY_SQL), {"lo": lo, "hi": hi})
            os.rename(tmp, folder / f"{time.time_ns():019d}-{os.getpid()}-{seq:06d}")
    finally:
        conn.close()
    Store(path).compact()
    return path
