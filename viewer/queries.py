"""The viewer's SQL, as named constants over the public views (docs/schema.md); see ``data.py``.

Values only ever arrive as ``$name`` parameters. The one formatted part, the runs table's ORDER BY,
is picked by name from ``SORTS``, never built from input.
"""

from __future__ import annotations

from looptrace.tracer.records.actions import STEP_ACTION_KEY_SQL
from looptrace.tracer.records.conventions import MODEL_CALL_MISSING

__all__ = [
    "SORTS", "RUNS_SQL", "RUN_COUNT_SQL", "RUN_SQL", "CHILDREN_SQL", "TIMELINE_SQL", "ACTIONS_SQL",
    "DIAGNOSES_SQL", "FAILED_CALLS_SQL", "STEP_CALLS_SQL", "STEP_LLM_SQL", "STEP_REDACTIONS_SQL", "FULL_STEP_SQL", "ORIGIN_SQL",
]

# ORDER BY clauses the runs table can sort by: chosen by name, never built from input.
SORTS: dict[str, str] = {
    "started": "r.started_at",
    "agent": "lower(r.agent)",
    "task": "lower(r.task)",
    "model": "lower(r.model)",
    "status": "r.status",
    "diagnosis": "d.label",
    "steps": "r.n_steps",
    "tokens": "r.input_tokens + r.output_tokens",
    "cost": "r.cost_usd",
    "duration": "seconds",
}

# Roots only unless a filter or a parent is given: children are reached from their parent.
RUNS_SQL = """
WITH r AS MATERIALIZED (SELECT * FROM runs),
d AS (
    SELECT run_id, any_value(label) FILTER (WHERE is_primary) AS label,
           count(*) FILTER (WHERE NOT is_primary) AS other_labels, list(DISTINCT label) AS labels
    FROM diagnoses GROUP BY run_id
),
kids AS (
    SELECT p AS run_id, count(DISTINCT run_id) AS children
    FROM (SELECT run_id, unnest([parent_run_id, replay_of, forked_from]) AS p FROM r)
    WHERE p IS NOT NULL GROUP BY p
)
SELECT r.run_id, r.parent_run_id, r.replay_of, r.forked_from, r.started_at, r.agent,
       left(r.task, 300) AS task, r.model, r.status, d.label, coalesce(d.other_labels, 0) AS other_labels,
       r.n_steps, r.input_tokens + r.output_tokens AS tokens, r.cost_usd,
       date_diff('millisecond', r.started_at, coalesce(r.ended_at, r.last_seen_at)) / 1000.0 AS seconds,
       coalesce(kids.children, 0) AS children
FROM r
LEFT JOIN d USING (run_id)
LEFT JOIN kids USING (run_id)
WHERE CASE WHEN $parent IS NOT NULL THEN $parent IN (r.parent_run_id, r.replay_of, r.forked_from)
           WHEN $roots THEN r.parent_run_id IS NULL AND r.replay_of IS NULL AND r.forked_from IS NULL
           ELSE true END
  AND (len($statuses) = 0 OR list_contains($statuses, lower(r.status)))
  AND (len($labels) = 0 OR list_has_any($labels, d.labels))
  AND (len($agents) = 0 OR len(list_filter($agents, lambda a: contains(lower(r.agent), a))) > 0)
  AND (len($models) = 0 OR len(list_filter($models, lambda m: contains(lower(r.model), m))) > 0)
  AND len(list_filter($words, lambda w: NOT (contains(lower(coalesce(r.task, '')), w)
                                             OR starts_with(r.run_id, w)))) = 0
ORDER BY {order} NULLS LAST, r.run_id
LIMIT $limit
"""

# Counts read the base table: the runs view would aggregate every step of every run first.
RUN_COUNT_SQL = "SELECT count(DISTINCT run_id) FROM run_records"

RUN_SQL = """
SELECT run_id, parent_run_id, replay_of, forked_from, fork_step, source, agent, left(task, 2000) AS task,
       model, status, started_at, ended_at, n_steps, input_tokens, output_tokens, cost_usd, n_llm_calls,
       left(answer, 2000) AS answer, left(error, 2000) AS error, strategy,
       date_diff('millisecond', started_at, coalesce(ended_at, last_seen_at)) / 1000.0 AS seconds
FROM runs WHERE run_id = $run_id
"""

CHILDREN_SQL = """
SELECT count(DISTINCT run_id) FROM run_records WHERE $run_id IN (parent_run_id, replay_of, forked_from)
"""

# A step's tool calls as one comparable key (equal actions, equal keys); NULL for a step without a
# tool. Defined once, in records/actions.py, for the loop, the analyzer, diff and this screen.
_ACTION_KEY = STEP_ACTION_KEY_SQL

# One line per step. Observations are never read here: only their sizes.
TIMELINE_SQL = """
SELECT step,
       list(tool ORDER BY call_index) AS tools,
       list(left(CAST(args AS VARCHAR), 200) ORDER BY call_index) AS args,
       sum(observation_bytes) AS observation_bytes,
       sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
       max(context_tokens) AS context_tokens, sum(cost_usd) AS cost_usd,
       bool_or(is_error) AS is_error,
       list(DISTINCT error_type) FILTER (WHERE error_type IS NOT NULL) AS error_types,
       {action_key} AS action_key,
       bool_or(contains(CAST(events AS VARCHAR), '"{missing}"')) AS call_missing
FROM steps WHERE run_id = $run_id
GROUP BY step ORDER BY step
LIMIT $limit
""".format(action_key=_ACTION_KEY, missing=MODEL_CALL_MISSING)

# The steps whose model call failed (refused, or out of retries), with the error: such a step has no tool
# call, and is not a final answer. Read beside the timeline, bounded like it.
FAILED_CALLS_SQL = """
SELECT step, any_value(left(error, 300) ORDER BY started_at DESC) AS error
FROM llm_calls WHERE run_id = $run_id AND step IS NOT NULL AND error IS NOT NULL
GROUP BY step ORDER BY step
LIMIT $limit
"""

# The action of each step, for comparing a replay or fork with its original.
ACTIONS_SQL = """
SELECT step, {action_key} AS action_key
FROM steps WHERE run_id = $run_id
GROUP BY step ORDER BY step
LIMIT $limit
""".format(action_key=_ACTION_KEY)

DIAGNOSES_SQL = """
SELECT label, is_primary, first_step, last_step, left(CAST(evidence AS VARCHAR), 20000) AS evidence,
       left(explanation, 2000) AS explanation
FROM diagnoses WHERE run_id = $run_id
ORDER BY is_primary DESC, first_step NULLS LAST, label
LIMIT $limit
"""

STEP_CALLS_SQL = """
SELECT call_index, tool, left(CAST(args AS VARCHAR), $cap) AS args,
       strlen(CAST(args AS VARCHAR)) AS args_bytes,
       left(observation, $cap) AS observation, observation_bytes, is_error, error_type, tool_call_id,
       started_at, ended_at, CASE WHEN call_index = 0 THEN left(thought, $cap) END AS thought,
       strlen(thought) AS thought_bytes,
       input_tokens, output_tokens, context_tokens, cost_usd, left(CAST(events AS VARCHAR), $cap) AS events
FROM steps WHERE run_id = $run_id AND step = $step
ORDER BY call_index
LIMIT $limit
"""

STEP_LLM_SQL = """
SELECT model, response_model, stop_reason, input_tokens, output_tokens, cache_read_tokens,
       cache_creation_tokens, cost_usd, latency_ms, retries, left(error, 2000) AS error
FROM llm_calls WHERE run_id = $run_id AND step = $step
ORDER BY started_at
LIMIT $limit
"""

# The redaction manifest of one step: where a secret was replaced and by which rule, never the value.
STEP_REDACTIONS_SQL = """
SELECT left(field, 200) AS field, rule, sum(n)::BIGINT AS n
FROM redactions WHERE run_id = $run_id AND step = $step
GROUP BY ALL ORDER BY field, rule
LIMIT $limit
"""

# Everything, uncut: only for the pager, on request.
FULL_STEP_SQL = """
SELECT call_index, tool, CAST(args AS VARCHAR) AS args, observation, thought
FROM steps WHERE run_id = $run_id AND step = $step
ORDER BY call_index
"""

# Where a replay or fork comes from.
ORIGIN_SQL = "SELECT replay_of, forked_from FROM runs WHERE run_id = ?"
