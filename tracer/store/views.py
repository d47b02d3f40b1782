"""The public views: what users query.

Each view is a named constant so the rules are readable; ``VIEWS`` is applied in order both inside
the DuckDB file (so the plain DuckDB CLI and Harlequin see them) and in every reader session, where
the base tables also include rows from segments not yet absorbed. See docs/schema.md.
"""

from __future__ import annotations

from .tables import LIVE_TABLES

__all__ = ["VIEWS", "VIEW_NAMES"]

# The current preview of each trace still open: ``looptrace collect`` writes what it has derived so far
# of an open trace as a revision of it, and the trace's final write closes it (``open`` false) in the
# same segment as its records (tables.py, LIVE_TABLES). So a run is shown from its records or from its
# latest preview, never both, and the final write replaces the preview.
_CURRENT_PREVIEWS = """(
    SELECT trace_id, revision FROM live_traces
    QUALIFY row_number() OVER (PARTITION BY trace_id ORDER BY revision DESC) = 1 AND open
)"""


def _preview(table: str) -> str:
    """The rows of record table ``table`` in the current previews, as a subquery shaped like the table."""
    return (f"(SELECT p.* EXCLUDE (live_trace_id, live_revision) FROM {LIVE_TABLES[table]} p "
            f"SEMI JOIN {_CURRENT_PREVIEWS} c ON p.live_trace_id = c.trace_id AND p.live_revision = c.revision)")


_RECORDS = {table: table for table in LIVE_TABLES}
_PREVIEWS = {table: _preview(table) for table in LIVE_TABLES}


# A run's cost is the sum of its calls' (or steps') costs only when each call that used tokens has
# one: a call of a model with no price makes the run's cost unknown (NULL), not the priced part
# alone, which would read as the whole. A call with no usage at all (it failed before any tokens)
# costs nothing known and leaves the sum as it is.
_KNOWN_COST = ("CASE WHEN count(*) FILTER (WHERE cost_usd IS NULL AND coalesce(input_tokens, output_tokens) "
              "IS NOT NULL) = 0 THEN sum(cost_usd) END")


def _with_previews(view: str, body: str) -> str:
    """``view`` as ``body`` over the record tables, then the same over the current previews. Two whole
    branches rather than each table unioned with its preview: the records' branch is planned exactly
    as it was before previews existed (filters push down the same), and the previews' branch costs
    nothing when no trace is open."""
    return (f"CREATE OR REPLACE VIEW {view} AS\nSELECT * FROM ({body.format(known_cost=_KNOWN_COST, **_RECORDS)})\n"
            f"UNION ALL\nSELECT * FROM ({body.format(known_cost=_KNOWN_COST, **_PREVIEWS)})\n")


# A run writes one record when it starts and one when it ends; the latest complete record wins.
# A run with no end record never finished (still running, or its process died): `incomplete`. A run of a
# trace `looptrace collect` still holds open is shown from its latest preview: status `running`, no ended_at.
# Tokens and cost nobody recorded stay NULL (unknown is not 0: an imported transcript without usage).
# An imported run is one record with its status but, when the file kept no times, no ended_at:
# its status stands (start records carry no status).
RUNS = _with_previews("runs", """
WITH latest AS (
    SELECT * FROM {run_records}
    QUALIFY row_number() OVER (
        PARTITION BY run_id ORDER BY (ended_at IS NOT NULL) DESC, recorded_at DESC) = 1
),
first_seen AS (
    SELECT run_id, min(started_at) AS started_at FROM {run_records} GROUP BY run_id
),
step_totals AS (
    SELECT run_id, count(DISTINCT step) AS n_steps,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           {known_cost} AS cost_usd, max(ended_at) AS last_step_at
    FROM {step_records} GROUP BY run_id
),
llm_totals AS (
    SELECT run_id, count(*) AS n_llm_calls,
           sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           {known_cost} AS cost_usd
    FROM {llm_call_records} WHERE run_id IS NOT NULL GROUP BY run_id
)
SELECT
    l.run_id,
    l.parent_run_id,
    l.source,
    l.agent,
    l.task,
    l.model,
    CASE WHEN l.ended_at IS NULL AND l.status IS NULL THEN 'incomplete' ELSE coalesce(l.status, 'incomplete') END
        AS status,
    coalesce(f.started_at, l.started_at) AS started_at,
    l.ended_at,
    coalesce(s.n_steps, 0) AS n_steps,
    coalesce(m.input_tokens, l.input_tokens, s.input_tokens) AS input_tokens,
    coalesce(m.output_tokens, l.output_tokens, s.output_tokens) AS output_tokens,
    coalesce(m.cost_usd, l.cost_usd, s.cost_usd) AS cost_usd,
    coalesce(m.n_llm_calls, 0) AS n_llm_calls,
    l.answer,
    l.error,
    l.strategy,
    l.replay_of,
    l.forked_from,
    l.fork_step,
    greatest(l.recorded_at, s.last_step_at) AS last_seen_at,
    l.trace_id
FROM latest l
LEFT JOIN first_seen f USING (run_id)
LEFT JOIN step_totals s USING (run_id)
LEFT JOIN llm_totals m USING (run_id)
""")

# One row per tool call. A step whose model call asked for no tool (a final answer) has one row
# with tool NULL. Step-level tokens and cost sit on call_index 0 only, so SUM() over steps is right;
# unknown ones (an importer whose file kept no usage) stay NULL on every row, so SUM() is NULL too.
# The full outer join keeps tool calls whose step span was never exported (a killed process).
STEPS = _with_previews("steps", """
SELECT
    coalesce(s.run_id, t.run_id) AS run_id,
    coalesce(s.step, t.step) AS step,
    coalesce(t.call_index, 0) AS call_index,
    coalesce(s.started_at, t.started_at) AS started_at,
    coalesce(s.ended_at, t.ended_at) AS ended_at,
    s.thought,
    t.tool,
    t.args,
    t.observation,
    coalesce(t.observation_bytes, 0) AS observation_bytes,
    coalesce(t.is_error, false) AS is_error,
    t.error_type,
    t.tool_call_id,
    t.action_key,
    t.progress_key,
    t.near_key,
    CASE WHEN coalesce(t.call_index, 0) = 0 OR s.input_tokens IS NULL THEN s.input_tokens ELSE 0 END AS input_tokens,
    CASE WHEN coalesce(t.call_index, 0) = 0 OR s.output_tokens IS NULL THEN s.output_tokens ELSE 0 END
        AS output_tokens,
    CASE WHEN coalesce(t.call_index, 0) = 0 THEN s.context_tokens END AS context_tokens,
    CASE WHEN coalesce(t.call_index, 0) = 0 OR s.cost_usd IS NULL THEN s.cost_usd ELSE 0.0 END AS cost_usd,
    CASE WHEN coalesce(t.call_index, 0) = 0 THEN s.events END AS events
FROM {step_records} s
FULL OUTER JOIN {tool_call_records} t ON s.run_id = t.run_id AND s.step = t.step
""")

TOOL_CALLS = _with_previews("tool_calls", """
SELECT run_id, step, call_index, tool_call_id, tool, args, action_key, progress_key, near_key, observation,
       observation_bytes, is_error, error_type, started_at, ended_at,
       date_diff('millisecond', started_at, ended_at) AS duration_ms
FROM {tool_call_records}
""")

# Retries are what the caller recorded (the Anthropic instrumentor counts the SDK's retries itself), or
# the resend count of the anthropic SDK's own span for the call when there is one (it nests under the
# chat span when the client traces into the same provider), whichever is larger.
_LLM_CALL_COLUMNS = """l.run_id, l.step, l.call_id, l.base_call_id, l.provider, l.model, l.response_model,
       l.started_at, l.ended_at, date_diff('millisecond', l.started_at, l.ended_at) AS latency_ms,
       l.params, l.system_sha, l.tools_sha, l.messages_keep, l.request_sha, l.stop_reason,
       l.input_tokens, l.output_tokens, l.cache_read_tokens, l.cache_creation_tokens, l.cost_usd"""
# A preview's calls have no SDK spans in `spans` yet (they are in the journal): their own retries only.
LLM_CALLS = f"""
CREATE OR REPLACE VIEW llm_calls AS
SELECT * FROM (
    WITH sdk AS (
        SELECT parent_span_id,
               max(TRY_CAST(attributes->>'$."http.request.resend_count"' AS INTEGER)) AS resends
        FROM spans WHERE name LIKE 'anthropic.%' GROUP BY parent_span_id
    )
    SELECT {_LLM_CALL_COLUMNS}, greatest(coalesce(l.retries, 0), coalesce(sdk.resends, 0)) AS retries, l.error
    FROM llm_call_records l
    LEFT JOIN sdk ON sdk.parent_span_id = l.call_id
)
UNION ALL
SELECT {_LLM_CALL_COLUMNS}, coalesce(l.retries, 0) AS retries, l.error
FROM {_PREVIEWS["llm_call_records"]} l
"""

# Roll-ups: where the tokens and the money went. `run_usage` is one row per run with its totals
# taken the way `runs` takes them (NULL when unknown, never 0): a run whose model has no
# price keeps a NULL cost, so a roll-up tells "unknown" (NULL, counted in `unpriced_runs`) from
# "free" (0). sum() skips NULLs and is NULL when every value is: a group with no priced run has a
# NULL cost, never 0.
RUN_USAGE = f"""
CREATE OR REPLACE VIEW run_usage AS
WITH latest AS (
    SELECT * FROM run_records
    QUALIFY row_number() OVER (
        PARTITION BY run_id ORDER BY (ended_at IS NOT NULL) DESC, recorded_at DESC) = 1
),
first_seen AS (
    SELECT run_id, min(started_at) AS started_at FROM run_records GROUP BY run_id
),
step_usage AS (
    SELECT run_id, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           {_KNOWN_COST} AS cost_usd
    FROM step_records GROUP BY run_id
),
llm_usage AS (
    SELECT run_id, sum(input_tokens) AS input_tokens, sum(output_tokens) AS output_tokens,
           {_KNOWN_COST} AS cost_usd
    FROM llm_call_records WHERE run_id IS NOT NULL GROUP BY run_id
)
SELECT
    l.run_id,
    l.agent,
    l.model,
    CAST(coalesce(f.started_at, l.started_at) AS DATE) AS day,
    coalesce(m.input_tokens, l.input_tokens, s.input_tokens) AS input_tokens,
    coalesce(m.output_tokens, l.output_tokens, s.output_tokens) AS output_tokens,
    coalesce(m.cost_usd, l.cost_usd, s.cost_usd) AS cost_usd
FROM latest l
LEFT JOIN first_seen f USING (run_id)
LEFT JOIN step_usage s USING (run_id)
LEFT JOIN llm_usage m USING (run_id)
"""

# An agent's sub-run of a team's run (an imported AgentChat or CrewAI log: attribute `team_agent`)
# holds copies of the team's steps. It is counted under its agent, and what the sub-runs hold is
# taken off the team's row, so a sum over agents counts each token once (a subagent's run of the
# loop holds its own steps, not copies, and is not taken off its parent). What is left on the team's
# row is NULL when nothing is (a sum over no steps), so an agent none of whose calls recorded usage
# shows as unknown, not 0.
_ROLLUP = """
CREATE OR REPLACE VIEW {view} AS
WITH copies AS (
    SELECT DISTINCT run_id, parent_run_id FROM run_records
    WHERE parent_run_id IS NOT NULL AND attributes->>'$.team_agent' IS NOT NULL
),
copied AS (
    SELECT c.parent_run_id AS run_id, sum(u.input_tokens) AS input_tokens,
           sum(u.output_tokens) AS output_tokens, sum(u.cost_usd) AS cost_usd
    FROM run_usage u JOIN copies c USING (run_id) GROUP BY ALL
),
counted AS (
    SELECT u.* REPLACE (CASE WHEN c.run_id IS NULL THEN u.input_tokens
                             ELSE nullif(u.input_tokens - coalesce(c.input_tokens, 0), 0) END AS input_tokens,
                        CASE WHEN c.run_id IS NULL THEN u.output_tokens
                             ELSE nullif(u.output_tokens - coalesce(c.output_tokens, 0), 0) END AS output_tokens,
                        CASE WHEN c.run_id IS NULL THEN u.cost_usd
                             ELSE nullif(u.cost_usd - coalesce(c.cost_usd, 0), 0) END AS cost_usd)
    FROM run_usage u LEFT JOIN copied c USING (run_id)
)
SELECT {key},
       count(*) AS runs,
       count(*) FILTER (WHERE cost_usd IS NULL) AS unpriced_runs,
       CAST(sum(input_tokens) AS BIGINT) AS input_tokens,
       CAST(sum(output_tokens) AS BIGINT) AS output_tokens,
       CAST(sum(input_tokens) + sum(output_tokens) AS BIGINT) AS tokens,
       sum(cost_usd) AS cost_usd
FROM counted
GROUP BY ALL
"""

USAGE_BY_AGENT = _ROLLUP.format(view="usage_by_agent", key="agent")
USAGE_BY_MODEL = _ROLLUP.format(view="usage_by_model", key="model")
USAGE_BY_DAY = _ROLLUP.format(view="usage_by_day", key="day")

# The redaction manifest: where a secret was replaced and by which rule, never the value. A span's
# row takes the step of the step, tool call or model call the span recorded.
REDACTIONS = """
CREATE OR REPLACE VIEW redactions AS
WITH span_steps AS (
    SELECT span_id, any_value(step) AS step FROM (
        SELECT span_id, step FROM step_records UNION ALL
        SELECT span_id, step FROM tool_call_records UNION ALL
        SELECT span_id, step FROM llm_call_records)
    WHERE span_id IS NOT NULL GROUP BY span_id
)
SELECT r.run_id, coalesce(r.step, s.step) AS step, r.record, r.field, r.rule, sum(r.n)::BIGINT AS n,
       min(r.recorded_at) AS recorded_at
FROM redaction_records r
LEFT JOIN span_steps s USING (span_id)
GROUP BY ALL
"""

# What `looptrace collect` acknowledged of traces still open: a live agent's spans before its trace
# ends and becomes runs and steps. Read from the receiver's journal (`received_spans`, one row per
# span even if a client sent it twice); a span leaves this view when its trace is written to `spans`.
OPEN_SPANS = """
CREATE OR REPLACE VIEW open_spans AS
SELECT r.trace_id, r.span_id, r.parent_span_id, r.name, r.kind,
       try(make_timestamp(CAST(r.start_ns // 1000 AS BIGINT))) AS start_time,
       try(make_timestamp(CAST(r.end_ns // 1000 AS BIGINT))) AS end_time,
       r.status_code, r.status_message, r.attributes, r.events, r.resource, r.scope, r.received_at
FROM received_spans r ANTI JOIN spans s USING (trace_id, span_id)
QUALIFY row_number() OVER (PARTITION BY r.trace_id, r.span_id ORDER BY r.received_at) = 1
"""

VIEWS: tuple[str, ...] = (
    RUNS, STEPS, TOOL_CALLS, LLM_CALLS, RUN_USAGE, USAGE_BY_AGENT, USAGE_BY_MODEL, USAGE_BY_DAY, REDACTIONS,
    OPEN_SPANS,
)
VIEW_NAMES: tuple[str, ...] = (
    "runs", "steps", "tool_calls", "llm_calls", "run_usage", "usage_by_agent", "usage_by_model", "usage_by_day",
    "redactions", "open_spans",
)
