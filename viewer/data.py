"""Every database read the viewer makes: named SQL, bounded, parameters only, plain dataclasses out.

Each function opens a reader session, runs its queries and closes it before returning: the viewer
never holds the store open, because tracing processes and ``looptrace compact`` need the file.
Every query is bounded (``LIMIT n + 1`` tells "more exist" without counting), and long text is cut
in SQL (``left(...)``) with its full size beside it, so opening a step of a huge run moves at most
``TEXT_CAP`` characters per field. The timeline never reads observations at all.

``Store.reader`` makes sessions of one store take turns within the process and takes the file for
writing only when a segment is pending, so a refresh is cheap.

This module never imports Textual: the UI calls it from thread workers, tests call it directly.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from looptrace.replay.diff import RunDiff, diff_runs, load_step_facts
from looptrace.tracer.query.sql import QueryResult, run_query
from looptrace.tracer.records.conventions import MODEL_CALL_MISSING
from looptrace.tracer.store import Store

from .filters import RunFilter
from .format import pretty_json
from .live import live_findings
from .queries import (
    ACTIONS_SQL, CHILDREN_SQL, DIAGNOSES_SQL, FAILED_CALLS_SQL, FULL_STEP_SQL, ORIGIN_SQL, RUN_COUNT_SQL, RUN_SQL, RUNS_SQL, SORTS,
    STEP_CALLS_SQL, STEP_LLM_SQL, STEP_REDACTIONS_SQL, TIMELINE_SQL,
)

__all__ = [
    "RUNS_PAGE", "TIMELINE_LIMIT", "TEXT_CAP", "CALLS_LIMIT", "SQL_ROW_LIMIT", "SQL_TIMEOUT", "SQL_MEMORY_GB", "SORTS",
    "RunRow", "RunPage", "RunInfo", "TimelineStep", "DiagnosisRow", "RunDetail", "ToolCallDetail",
    "ModelCall", "StepDetail", "RunPair", "list_runs", "load_run", "load_actions", "load_diff", "load_step",
    "full_step_text", "run_sql", "primary_range",
]

RUNS_PAGE = 200  # runs per page of the runs table
TIMELINE_LIMIT = 5_000  # steps shown in a run's timeline
TEXT_CAP = 64 * 1024  # characters of one text field shown in a step; the rest goes to $PAGER
CALLS_LIMIT = 32  # tool calls shown for one step (parallel calls)
DIAGNOSES_LIMIT = 20
LLM_CALLS_LIMIT = 10
REDACTIONS_LIMIT = 50  # manifest rows (field, rule) shown for one step
SQL_ROW_LIMIT = 1_000  # hard limit pushed into user queries in the SQL screen
SQL_TIMEOUT = 10.0
SQL_MEMORY_GB = 2.0  # the query runs in a child process under this ceiling: the viewer is never the one stopped


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
    tokens: int | None  # None: unknown (an imported transcript with no usage), never shown as 0
    cost_usd: float | None
    seconds: float | None
    children: int
    live: str | None = None  # a running run's streak now, e.g. "same call 4x since step 12" (live.py)

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
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
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
    input_tokens: int | None
    output_tokens: int | None
    context_tokens: int | None
    cost_usd: float | None
    is_error: bool
    error_types: tuple[str, ...]
    action_key: str | None  # equal keys, equal actions (tools and arguments); None for no tool call
    call_error: str | None = None  # the step's model call failed: its error (the step is not an answer)
    call_missing: bool = False  # the trace lost the step's model call (a dropped span batch)

    @property
    def failed(self) -> bool:
        """A tool call or the model call of the step failed."""
        return self.is_error or self.call_error is not None


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
    input_tokens: int | None
    output_tokens: int | None
    context_tokens: int | None
    cost_usd: float | None
    events: str | None  # JSON text
    started_at: datetime | None
    ended_at: datetime | None
    # The redaction manifest of the step: (field path, rule, how many values), never the value.
    redactions: tuple[tuple[str, str, int], ...] = ()
    more_redactions: bool = False

    @property
    def call_missing(self) -> bool:
        """The trace lost this step's model call (a ``model_call_missing`` event on the step)."""
        return f'"{MODEL_CALL_MISSING}"' in (self.events or "")

    @property
    def hidden_bytes(self) -> int:
        """Bytes of thought, arguments and observations cut from this view."""
        shown = len((self.thought or "").encode()) + sum(
            len((c.observation or "").encode()) + len((c.args or "").encode()) for c in self.calls
        )
        total = self.thought_bytes + sum(c.observation_bytes + c.args_bytes for c in self.calls)
        return max(0, total - shown)


@contextmanager
def _session(store: Store) -> Iterator[duckdb.DuckDBPyConnection]:
    """A locked-down reader session, closed on exit."""
    with store.reader(locked_down=True) as conn:
        yield conn


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
    with _session(store) as conn:
        raw = _rows(conn, RUNS_SQL.format(order=order), params)
        total = conn.execute(RUN_COUNT_SQL).fetchone()
        rows, more = _bounded(raw, limit)
        running = [r["run_id"] for r in rows if r["status"] == "running"]
        live = live_findings(conn, running) if running else {}
    return RunPage(
        [RunRow(**{**r, "n_steps": r["n_steps"] or 0}, live=live.get(r["run_id"])) for r in rows],
        more, int(total[0]) if total else 0,
    )


def _timeline_step(r: dict[str, Any], failed: dict[int, str]) -> TimelineStep:
    return TimelineStep(
        step=r["step"], tools=tuple(r["tools"] or ()), args=tuple(r["args"] or ()),
        observation_bytes=int(r["observation_bytes"] or 0), input_tokens=r["input_tokens"],
        output_tokens=r["output_tokens"], context_tokens=r["context_tokens"],
        cost_usd=r["cost_usd"], is_error=bool(r["is_error"]),
        error_types=tuple(r["error_types"] or ()), action_key=r["action_key"],
        call_error=failed.get(r["step"]), call_missing=bool(r["call_missing"]),
    )


def load_run(store: Store, run_id: str, *, limit: int = TIMELINE_LIMIT) -> RunDetail | None:
    """A run's totals, its step timeline (no observations) and its diagnoses; None if no such run."""
    with _session(store) as conn:
        info = _rows(conn, RUN_SQL, {"run_id": run_id})
        if not info:
            return None
        steps = _rows(conn, TIMELINE_SQL, {"run_id": run_id, "limit": limit + 1})
        failed = dict(conn.execute(FAILED_CALLS_SQL, {"run_id": run_id, "limit": limit + 1}).fetchall())
        diagnoses = _rows(conn, DIAGNOSES_SQL, {"run_id": run_id, "limit": DIAGNOSES_LIMIT})
        children = conn.execute(CHILDREN_SQL, {"run_id": run_id}).fetchone()
    i = info[0]
    run = RunInfo(**{**i, "n_steps": i["n_steps"] or 0, "n_llm_calls": i["n_llm_calls"] or 0})
    shown, more = _bounded(steps, limit)
    return RunDetail(
        run, [_timeline_step(r, failed) for r in shown], more, [DiagnosisRow(**d) for d in diagnoses],
        int(children[0]) if children else 0,
    )


def load_actions(store: Store, run_id: str, *, limit: int = TIMELINE_LIMIT) -> list[tuple[int, str | None]]:
    """``(step, action_key)`` for each step of a run: what divergence is measured on."""
    with _session(store) as conn:
        rows = conn.execute(ACTIONS_SQL, {"run_id": run_id, "limit": limit}).fetchall()
    return [(int(step), key) for step, key in rows]


@dataclass(frozen=True)
class RunPair:
    """A replay or fork (``derived``) beside the run it comes from, their steps aligned by action."""

    original: str
    derived: str
    kind: str  # "replay" or "fork"
    diff: RunDiff
    more: bool  # a run had more than TIMELINE_LIMIT steps: only the first are compared


def load_diff(store: Store, run_id: str, *, limit: int = TIMELINE_LIMIT) -> RunPair | None:
    """``run_id`` aligned with its original (as ``looptrace diff`` does); None if it has none."""
    with _session(store) as conn:
        row = conn.execute(ORIGIN_SQL, [run_id]).fetchone()
        if row is None or not (row[0] or row[1]):
            return None
        original = str(row[0] or row[1])
        a, b = load_step_facts(conn, original), load_step_facts(conn, run_id)
    return RunPair(original, run_id, "replay" if row[0] else "fork", diff_runs(a[:limit], b[:limit]),
                   max(len(a), len(b)) > limit)


def load_step(store: Store, run_id: str, step: int, *, cap: int = TEXT_CAP) -> StepDetail | None:
    """One step with its text cut to ``cap`` characters per field, and its model calls."""
    with _session(store) as conn:
        calls = _rows(conn, STEP_CALLS_SQL,
                      {"run_id": run_id, "step": step, "cap": cap, "limit": CALLS_LIMIT + 1})
        llm = _rows(conn, STEP_LLM_SQL, {"run_id": run_id, "step": step, "limit": LLM_CALLS_LIMIT + 1})
        redacted = _rows(conn, STEP_REDACTIONS_SQL, {"run_id": run_id, "step": step, "limit": REDACTIONS_LIMIT + 1})
    if not calls:
        return None
    calls, more_calls = _bounded(calls, CALLS_LIMIT)
    llm, more_llm = _bounded(llm, LLM_CALLS_LIMIT)
    first = calls[0]
    return StepDetail(
        run_id=run_id, step=step, thought=first["thought"], thought_bytes=int(first["thought_bytes"] or 0),
        calls=[
            ToolCallDetail(
                call_index=c["call_index"], tool=c["tool"], args=c["args"],
                args_bytes=int(c["args_bytes"] or 0),
                observation=c["observation"], observation_bytes=int(c["observation_bytes"] or 0),
                is_error=bool(c["is_error"]), error_type=c["error_type"], tool_call_id=c["tool_call_id"],
            )
            for c in calls
        ],
        more_calls=more_calls,
        model_calls=[ModelCall(**m) for m in llm],
        more_model_calls=more_llm,
        input_tokens=first["input_tokens"], output_tokens=first["output_tokens"],
        context_tokens=first["context_tokens"], cost_usd=first["cost_usd"],
        events=first["events"],
        started_at=first["started_at"], ended_at=first["ended_at"],
        redactions=tuple((r["field"], r["rule"], int(r["n"])) for r in redacted[:REDACTIONS_LIMIT]),
        more_redactions=len(redacted) > REDACTIONS_LIMIT,
    )


def full_step_text(store: Store, run_id: str, step: int) -> str:
    """A step's whole thought, arguments and observations, uncut: what ``o`` opens in the pager."""
    with _session(store) as conn:
        rows = conn.execute(FULL_STEP_SQL, {"run_id": run_id, "step": step}).fetchall()
    if not rows:
        return ""
    parts = [f"run {run_id} step {step}", "", "== thought ==", rows[0][4] or ""]
    for call_index, tool, args, observation, _ in rows:
        if tool is None and observation is None:
            continue
        parts += ["", f"== call {call_index}: {tool} ==", pretty_json(args),
                  "", "== observation ==", observation or ""]
    return "\n".join(parts) + "\n"


def run_sql(
    store: Store, sql: str, *, limit: int = SQL_ROW_LIMIT, timeout: float = SQL_TIMEOUT,
    memory_gb: float = SQL_MEMORY_GB,
) -> QueryResult:
    """User SQL, exactly as ``looptrace sql`` runs it: one read-only statement on a locked-down session,
    in a child process stopped past ``timeout`` seconds or ``memory_gb``."""
    return run_query(store, sql, limit=limit, timeout=timeout, memory_gb=memory_gb)


def primary_range(diagnoses: Sequence[DiagnosisRow]) -> tuple[int, int] | None:
    """The steps the primary diagnosis names, if it names any."""
    d = next((d for d in diagnoses if d.is_primary), None)
    if d is None or d.first_step is None:
        return None
    return d.first_step, d.last_step if d.last_step is not None else d.first_step
