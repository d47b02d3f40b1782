"""The report's SQL, as named constants over the public views (docs/schema.md).

Values arrive only as ``$name`` parameters. Text is cut in SQL (``left(...)``) with its full size
beside it, so a run with a 10 MB observation never moves 10 MB into a page.
"""

from __future__ import annotations

from looptrace.tracer.records.conventions import MODEL_CALL_MISSING

__all__ = [
    "RUN_SQL", "STEPS_SQL", "DIAGNOSES_SQL", "HAS_REDACTIONS_VIEW_SQL", "REDACTIONS_VIEW_SQL",
    "REDACTION_ATTRS_SQL", "INDEX_SQL", "ROLLUP_SQL", "COUNT_CALLS_SQL", "PREFIX_SQL", "FAILED_CALLS_SQL",
]

# The viewer and the index show 12 characters of a run id: a unique prefix names a run.
PREFIX_SQL = "SELECT DISTINCT run_id FROM run_records WHERE starts_with(run_id, $prefix) ORDER BY run_id LIMIT 2"

RUN_SQL = """
SELECT run_id, agent, left(task, 4000) AS task, model, status, started_at, ended_at, n_steps,
       input_tokens, output_tokens, cost_usd, n_llm_calls, left(answer, 4000) AS answer,
       left(error, 4000) AS error, parent_run_id, replay_of, forked_from, source,
       date_diff('millisecond', started_at, coalesce(ended_at, last_seen_at)) / 1000.0 AS seconds
FROM runs WHERE run_id = $run_id
"""

# How many text-bearing rows the run has: it sets how much of each text fits the page budget.
COUNT_CALLS_SQL = "SELECT count(*) FROM steps WHERE run_id = $run_id"

# The first $limit steps, one row per tool call; the thought is on call 0 only.
STEPS_SQL = """
SELECT step, call_index, started_at, ended_at,
       CASE WHEN call_index = 0 THEN left(thought, $cap) END AS thought,
       CASE WHEN call_index = 0 THEN coalesce(strlen(thought), 0) ELSE 0 END AS thought_bytes,
       tool, left(CAST(args AS VARCHAR), $cap) AS args, coalesce(strlen(CAST(args AS VARCHAR)), 0) AS args_bytes,
       left(observation, $cap) AS observation, observation_bytes, is_error, error_type,
       input_tokens, output_tokens, context_tokens, cost_usd,
       coalesce(contains(CAST(events AS VARCHAR), '"{missing}"'), false) AS call_missing
FROM steps WHERE run_id = $run_id
QUALIFY dense_rank() OVER (ORDER BY step) <= $limit
ORDER BY step, call_index
""".replace("{missing}", MODEL_CALL_MISSING)

# The steps whose model call failed, with its error: such a step has no tool call and is no answer.
FAILED_CALLS_SQL = """
SELECT step, any_value(left(error, 2000) ORDER BY started_at DESC) AS error
FROM llm_calls WHERE run_id = $run_id AND step IS NOT NULL AND error IS NOT NULL
GROUP BY step ORDER BY step
LIMIT $limit
"""

DIAGNOSES_SQL = """
SELECT label, is_primary, first_step, last_step, left(CAST(evidence AS VARCHAR), 20000) AS evidence,
       left(explanation, 4000) AS explanation
FROM diagnoses WHERE run_id = $run_id
ORDER BY is_primary DESC, first_step NULLS LAST, label
LIMIT 50
"""

# Another part of looptrace may provide a `redactions` view (one row per redaction); when the store
# has it, the report shows it as it is, whatever its columns.
# A reader session may see it in the session's own catalog (applied with the other views) or in the
# attached store file: the session's own first. The names come from the catalog, never from input.
HAS_REDACTIONS_VIEW_SQL = """
SELECT database_name, schema_name FROM duckdb_views()
WHERE view_name = 'redactions' AND NOT internal
ORDER BY database_name = current_database() DESC, database_name LIMIT 1
"""
REDACTIONS_VIEW_SQL = "SELECT * FROM {view} WHERE run_id = $run_id LIMIT 500"

# Else the sink's per-span summary: `looptrace.redactions` = [{"rule": ..., "count": n}, ...].
REDACTION_ATTRS_SQL = """
SELECT attributes->>'$."looptrace.redactions"' FROM spans
WHERE run_id = $run_id AND attributes->>'$."looptrace.redactions"' IS NOT NULL
LIMIT 100000
"""

INDEX_SQL = """
WITH d AS (
    SELECT run_id, any_value(label) FILTER (WHERE is_primary) AS label FROM diagnoses GROUP BY run_id
)
SELECT r.run_id, r.agent, r.model, r.status, d.label, r.n_steps, r.input_tokens + r.output_tokens AS tokens,
       u.cost_usd, r.started_at,
       date_diff('millisecond', r.started_at, coalesce(r.ended_at, r.last_seen_at)) / 1000.0 AS seconds,
       left(r.task, 200) AS task
FROM runs r
LEFT JOIN d USING (run_id)
LEFT JOIN run_usage u USING (run_id)
ORDER BY r.started_at DESC NULLS LAST, r.run_id
LIMIT $limit
"""

# The roll-up views, picked by name from this mapping, never built from input.
ROLLUP_SQL: dict[str, str] = {
    name: f"SELECT * FROM usage_by_{name} ORDER BY cost_usd DESC NULLS LAST, tokens DESC NULLS LAST LIMIT $limit"
    for name in ("agent", "model", "day")
}
