"""Every database read the viewer makes: named SQL, bounded, parameters only, plain dataclasses out.

Each function opens a reader session, runs its queries and closes it before returning: the viewer
never holds the store open, because tracing processes and ``looptrace compact`` need the file.
Every query is bounded (``LIMIT n + 1`` tells "more exist" without counting), and long text is cut
in SQL (``left(...)``) with its full size beside it, so opening a step of a huge run moves at most
``TEXT_CAP`` characters per field. The timeline never reads observations at all.

This module never imports Textual: the UI calls it from thread workers, tests call it directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from tracer.sql import QueryResult, run_query
from tracer.store import Store

from .filters import RunFilter
from .format import pretty_json

__all__ = [
    "RUNS_PAGE", "TIMELINE_LIMIT", "TEXT_CAP", "CALLS_LIMIT", "SQL_ROW_LIMIT", "SQL_TIMEOUT", "SORTS",
    "RunRow", "RunPage", "RunInfo", "TimelineStep", "DiagnosisRow", "RunDetail", "ToolCallDetail",
    "ModelCall", "StepDetail", "list_runs", "load_run", "load_actions", "load_step", "full_step_text",
    "run_sql", "primary_range",
]

RUNS_PAGE = 200  # runs per page of the runs table
TIMELINE_LIMIT = 5_000  # steps shown in a run's timeline
TEXT_CAP = 64 * 1024  # characters of one text field shown in a step; the rest goes to $PAGER
CALLS_LIMIT = 32  # tool calls shown for one step (parallel calls)
DIAGNOSES_LIMIT = 20
LLM_CALLS_LIMIT = 10
SQL_ROW_LIMIT = 1_000  # hard limit pushed into user queries in the SQL screen
SQL_TIMEOUT = 10.0

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

RUN_COUNT_SQL = "SELECT count(*) FROM runs"

RUN_SQL = """
SELECT run_id, parent_run_id, replay_of, forked_from, fork_step, source, agent, left(task, 2000) AS task,
       model, status, started_at, ended_at, n_steps, input_tokens, output_tokens, cost_usd, n_llm_calls,
       left(answer, 2000) AS answer, left(error, 2000) AS error, strategy,
       date_diff('millisecond', started_at, coalesce(ended_at, last_seen_at)) / 1000.0 AS seconds
FROM runs WHERE run_id = $run_id
"""

CHILDREN_SQL = "SELECT count(*) FROM runs WHERE $run_id IN (parent_run_id, replay_of, forked_from)"

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
       CASE WHEN count(tool) = 0 THEN NULL ELSE md5(string_agg(
           coalesce(tool, '') || ' ' || coalesce(CAST(args AS VARCHAR), ''), chr(10) ORDER BY call_index))
       END AS action_key
FROM steps WHERE run_id = $run_id
GROUP BY step ORDER BY step
LIMIT $limit
"""

# The action of each step, for comparing a replay or fork with its original.
ACTIONS_SQL = """
SELECT step, CASE WHEN count(tool) = 0 THEN NULL ELSE md5(string_agg(
           coalesce(tool, '') || ' ' || coalesce(CAST(args AS VARCHAR), ''), chr(10) ORDER BY call_index))
       END AS action_key
FROM steps WHERE run_id = $run_id
GROUP BY step ORDER BY step
LIMIT $limit
"""

DIAGNOSES_SQL = """
SELECT label, is_primary, first_step, last_step, left(CAST(evidence AS VARCHAR), 20000) AS evidence,
       left(explanation, 2000) AS explanation
FROM diagnoses WHERE run_id = $run_id
ORDER BY is_primary DESC, first_step NULLS LAST, label
LIMIT $limit
"""

STEP_CALLS_SQL = """
SELECT call_index, tool, left(CAST(args AS VARCHAR), $cap) AS args, strlen(CAST(args AS VARCHAR)) AS args_bytes,
       left(observation, $cap) AS observation, observation_bytes, is_error, error_type, tool_call_id,
       started_at, ended_at, left(thought, $cap) AS thought, strlen(thought) AS thought_bytes,
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

# Everything, uncut: only for the pager, on request.
FULL_STEP_SQL = """
SELECT call_index, tool, CAST(args AS VARCHAR) AS args, observation, thought
FROM steps WHERE run_id = $run_id AND step = $step
ORDER BY call_index
"""


@dataclass(frozen=True)
class RunRow:
    run_id: str
    parent_run_id: str | None
    replay_of: str | None
    forked_from: str | None
    started_at: datetime | None
    agent: str | None
    task: str | None
    model: str | None
    status: str | None
    label: str | None  # primary diagnosis
    other_labels: int
    n_steps: int
    tokens: int
    cost_usd: float
    seconds: float | None
    children: int

    @property
    def is_child(self) -> bool:
        return bool(self.parent_run_id or self.replay_of or self.forked_from)


@dataclass(frozen=True)
class RunPage:
    rows: list[RunRow]
    more: bool  # more runs match than were fetched
    total_runs: int  # runs in the store


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    parent_run_id: str | None
    replay_of: str | None
    forked_from: str | None
    fork_step: int | None
    source: str | None
    agent: str | None
    task: str | None
    model: str | None
    status: str | None
    started_at: datetime | None
    ended_at: datetime | None
    n_steps: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    n_llm_calls: int
    answer: str | None
    error: str | None
    strategy: str | None
    seconds: float | None

    @property
    def original(self) -> str | None:
        """The run this one replays or forks, if any."""
        return self.replay_of or self.forked_from


@dataclass(frozen=True)
class TimelineStep:
    step: int
    tools: tuple[str | None, ...]
    args: tuple[str | None, ...]  # each cut to 200 characters
    observation_bytes: int
    input_tokens: int
    output_tokens: int
    context_tokens: int | None
    cost_usd: float
    is_error: bool
    error_types: tuple[str, ...]
    action_key: str | None  # equal keys, equal actions (tools and arguments); None for no tool call


@dataclass(frozen=True)
class DiagnosisRow:
    label: str
    is_primary: bool
    first_step: int | None
    last_step: int | None
    evidence: str | None  # JSON text
    explanation: str | None


@dataclass(frozen=True)
class RunDetail:
    run: RunInfo
    steps: list[TimelineStep]
    more_steps: bool
    diagnoses: list[DiagnosisRow]
    children: int

    @property
    def primary(self) -> DiagnosisRow | None:
        return next((d for d in self.diagnoses if d.is_primary), None)


@dataclass(frozen=True)
class ToolCallDetail:
    call_index: int
    tool: str | None
    args: str | None  # cut to TEXT_CAP characters
    args_bytes: int
    observation: str | None  # cut to TEXT_CAP characters
    observation_bytes: int
    is_error: bool
    error_type: str | None
    tool_call_id: str | None


@dataclass(frozen=True)
class ModelCall:
    model: str | None
    response_model: str | None
    stop_reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_creation_tokens: int | None
    cost_usd: float | None
    latency_ms: int | None
    retries: int | None
    error: str | None


@dataclass(frozen=True)
class StepDetail:
    run_id: str
    step: int
    thought: str | None  # cut to TEXT_CAP characters
    thought_bytes: int
    calls: list[ToolCallDetail]
    more_calls: bool
    model_calls: list[ModelCall]
    more_model_calls: bool
    input_tokens: int
    output_tokens: int
    context_tokens: int | None
    cost_usd: float
    events: str | None  # JSON text
    started_at: datetime | None
    ended_at: datetime | None

    @property
    def hidden_bytes(self) -> int:
        """Bytes of thought, arguments and observations cut from this view."""
        shown = len((self.thought or "").encode()) + sum(
            len((c.observation or "").encode()) + len((c.args or "").encode()) for c in self.calls
        )
        total = self.thought_bytes + sum(c.observation_bytes + c.args_bytes for c in self.calls)
        return max(0, total - shown)


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _bounded(rows: list[dict[str, Any]], limit: int) -> tuple[list[dict[str, Any]], bool]:
    return rows[:limit], len(rows) > limit


def list_runs(
    store: Store, flt: RunFilter = RunFilter(), *, sort: str = "started", descending: bool = True,
    parent: str | None = None, limit: int = RUNS_PAGE,
) -> RunPage:
    """One page of runs matching ``flt``: roots only, unless filtering or listing ``parent``'s children."""
    order = f"{SORTS[sort]} {'DESC' if descending else 'ASC'}"
    params: dict[str, Any] = {
        "parent": parent, "roots": not flt.active, "statuses": list(flt.statuses), "labels": list(flt.labels),
        "agents": list(flt.agents), "models": list(flt.models), "words": list(flt.words), "limit": limit + 1,
    }
    with store.reader() as conn:
        raw = _rows(conn, RUNS_SQL.format(order=order), params)
        total = conn.execute(RUN_COUNT_SQL).fetchone()
    rows, more = _bounded(raw, limit)
    return RunPage(
        [RunRow(**{**r, "n_steps": r["n_steps"] or 0, "tokens": r["tokens"] or 0, "cost_usd": r["cost_usd"] or 0.0})
         for r in rows],
        more, int(total[0]) if total else 0,
    )


def _timeline_step(r: dict[str, Any]) -> TimelineStep:
    return TimelineStep(
        step=r["step"], tools=tuple(r["tools"] or ()), args=tuple(r["args"] or ()),
        observation_bytes=int(r["observation_bytes"] or 0), input_tokens=int(r["input_tokens"] or 0),
        output_tokens=int(r["output_tokens"] or 0), context_tokens=r["context_tokens"],
        cost_usd=float(r["cost_usd"] or 0.0), is_error=bool(r["is_error"]),
        error_types=tuple(r["error_types"] or ()), action_key=r["action_key"],
    )


def load_run(store: Store, run_id: str, *, limit: int = TIMELINE_LIMIT) -> RunDetail | None:
    """A run's totals, its step timeline (no observations) and its diagnoses; None if no such run."""
    with store.reader() as conn:
        info = _rows(conn, RUN_SQL, {"run_id": run_id})
        if not info:
            return None
        steps = _rows(conn, TIMELINE_SQL, {"run_id": run_id, "limit": limit + 1})
        diagnoses = _rows(conn, DIAGNOSES_SQL, {"run_id": run_id, "limit": DIAGNOSES_LIMIT})
        children = conn.execute(CHILDREN_SQL, {"run_id": run_id}).fetchone()
    i = info[0]
    run = RunInfo(**{**i, "n_steps": i["n_steps"] or 0, "input_tokens": i["input_tokens"] or 0,
                     "output_tokens": i["output_tokens"] or 0, "cost_usd": i["cost_usd"] or 0.0,
                     "n_llm_calls": i["n_llm_calls"] or 0})
    shown, more = _bounded(steps, limit)
    return RunDetail(
        run, [_timeline_step(r) for r in shown], more, [DiagnosisRow(**d) for d in diagnoses],
        int(children[0]) if children else 0,
    )


def load_actions(store: Store, run_id: str, *, limit: int = TIMELINE_LIMIT) -> list[tuple[int, str | None]]:
    """``(step, action_key)`` for each step of a run: what divergence is measured on."""
    with store.reader() as conn:
        rows = conn.execute(ACTIONS_SQL, {"run_id": run_id, "limit": limit}).fetchall()
    return [(int(step), key) for step, key in rows]


def load_step(store: Store, run_id: str, step: int, *, cap: int = TEXT_CAP) -> StepDetail | None:
    """One step with its text cut to ``cap`` characters per field, and its model calls."""
    with store.reader() as conn:
        calls = _rows(conn, STEP_CALLS_SQL, {"run_id": run_id, "step": step, "cap": cap, "limit": CALLS_LIMIT + 1})
        llm = _rows(conn, STEP_LLM_SQL, {"run_id": run_id, "step": step, "limit": LLM_CALLS_LIMIT + 1})
    if not calls:
        return None
    calls, more_calls = _bounded(calls, CALLS_LIMIT)
    llm, more_llm = _bounded(llm, LLM_CALLS_LIMIT)
    first = calls[0]
    return StepDetail(
        run_id=run_id, step=step, thought=first["thought"], thought_bytes=int(first["thought_bytes"] or 0),
        calls=[
            ToolCallDetail(
                call_index=c["call_index"], tool=c["tool"], args=c["args"], args_bytes=int(c["args_bytes"] or 0),
                observation=c["observation"], observation_bytes=int(c["observation_bytes"] or 0),
                is_error=bool(c["is_error"]), error_type=c["error_type"], tool_call_id=c["tool_call_id"],
            )
            for c in calls
        ],
        more_calls=more_calls,
        model_calls=[ModelCall(**m) for m in llm],
        more_model_calls=more_llm,
        input_tokens=int(first["input_tokens"] or 0), output_tokens=int(first["output_tokens"] or 0),
        context_tokens=first["context_tokens"], cost_usd=float(first["cost_usd"] or 0.0), events=first["events"],
        started_at=first["started_at"], ended_at=first["ended_at"],
    )


def full_step_text(store: Store, run_id: str, step: int) -> str:
    """A step's whole thought, arguments and observations, uncut: what ``o`` opens in the pager."""
    with store.reader() as conn:
        rows = conn.execute(FULL_STEP_SQL, {"run_id": run_id, "step": step}).fetchall()
    if not rows:
        return ""
    parts = [f"run {run_id} step {step}", "", "== thought ==", rows[0][4] or ""]
    for call_index, tool, args, observation, _ in rows:
        if tool is None and observation is None:
            continue
        parts += ["", f"== call {call_index}: {tool} ==", pretty_json(args), "", "== observation ==", observation or ""]
    return "\n".join(parts) + "\n"


def run_sql(store: Store, sql: str, *, limit: int = SQL_ROW_LIMIT, timeout: float = SQL_TIMEOUT) -> QueryResult:
    """User SQL, exactly as ``looptrace sql`` runs it: one read-only statement on a locked-down session."""
    return run_query(store, sql, limit=limit, timeout=timeout)


def primary_range(diagnoses: Sequence[DiagnosisRow]) -> tuple[int, int] | None:
    """The steps the primary diagnosis names, if it names any."""
    d = next((d for d in diagnoses if d.is_primary), None)
    if d is None or d.first_step is None:
        return None
    return d.first_step, d.last_step if d.last_step is not None else d.first_step
