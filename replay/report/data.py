"""What a report shows, read from the store's public views into plain dataclasses.

Each loader opens one locked-down reader session and closes it before returning. Text is cut in
SQL to a per-field cap chosen so that a page stays small (``PAGE_TEXT_BUDGET`` characters of trace
text in all, whatever the run); what is cut is counted, never silently dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from looptrace.tracer.store import Store

from ..analyzer.windows import window_for
from .queries import (
    COUNT_CALLS_SQL, DIAGNOSES_SQL, FAILED_CALLS_SQL, HAS_REDACTIONS_VIEW_SQL, INDEX_SQL, PREFIX_SQL, REDACTION_ATTRS_SQL,
    REDACTIONS_VIEW_SQL, ROLLUP_SQL, RUN_SQL, STEPS_SQL,
)

__all__ = [
    "STEP_LIMIT", "INDEX_LIMIT", "PAGE_TEXT_BUDGET", "Call", "Step", "Diagnosis", "Manifest", "RunReport",
    "IndexRow", "Rollup", "load_report", "load_index", "load_rollups", "text_cap", "resolve_run",
]

STEP_LIMIT = 2_000  # steps shown on one page
INDEX_LIMIT = 10_000  # runs listed in one index
ROLLUP_LIMIT = 500  # rows of one roll-up table
PAGE_TEXT_BUDGET = 1_200_000  # characters of trace text on one page: a 200-step run stays under 2 MB
_MIN_CAP, _MAX_CAP = 1_000, 64_000
_EVIDENCE_STEPS = 200  # steps one diagnosis links to


def text_cap(fields: int) -> int:
    """Characters kept of each text field when a page holds ``fields`` of them."""
    return max(_MIN_CAP, min(_MAX_CAP, PAGE_TEXT_BUDGET // max(1, fields)))


@dataclass(frozen=True)
class Call:
    tool: str | None
    args: str | None
    args_bytes: int
    observation: str | None
    observation_bytes: int
    is_error: bool
    error_type: str | None


@dataclass(frozen=True)
class Step:
    step: int
    thought: str | None
    thought_bytes: int
    calls: tuple[Call, ...]
    input_tokens: int | None
    output_tokens: int | None
    context_tokens: int | None
    cost_usd: float | None
    started_at: datetime | None
    ended_at: datetime | None
    call_error: str | None = None  # the step's model call failed: its error (the step is not an answer)
    call_missing: bool = False  # the trace lost the step's model call (a dropped span batch)

    @property
    def duration_ms(self) -> int | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return int((self.ended_at - self.started_at).total_seconds() * 1000)

    @property
    def is_error(self) -> bool:
        return self.call_error is not None or any(c.is_error for c in self.calls)

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt sent at this step: the recorded context, else the step's input tokens."""
        return self.context_tokens if self.context_tokens is not None else (self.input_tokens or None)


@dataclass(frozen=True)
class Diagnosis:
    label: str
    is_primary: bool
    first_step: int | None
    last_step: int | None
    evidence: dict[str, Any]
    explanation: str | None

    @property
    def evidence_steps(self) -> list[int]:
        """The steps the evidence names, else the range the finding spans."""
        listed = self.evidence.get("steps")
        if isinstance(listed, list) and all(isinstance(s, int) for s in listed):
            return sorted(set(listed))[:_EVIDENCE_STEPS]
        # A projected step is where the run would have gone, not one it took.
        named = [v for k, v in self.evidence.items()
                 if k.endswith("_step") and not k.startswith("projected") and isinstance(v, int)]
        if self.first_step is None:
            return sorted(set(named))
        last = self.last_step if self.last_step is not None else self.first_step
        return sorted(set(range(self.first_step, min(last, self.first_step + _EVIDENCE_STEPS - 1) + 1)) | set(named))


@dataclass(frozen=True)
class Manifest:
    """The redactions of a run: from a ``redactions`` view if the store has one, else span attributes."""

    source: str  # "redactions view", "span attributes" or "none"
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class RunReport:
    run_id: str
    agent: str | None
    task: str | None
    model: str | None
    status: str | None
    source: str | None
    parent_run_id: str | None
    replay_of: str | None
    forked_from: str | None
    started_at: datetime | None
    ended_at: datetime | None
    seconds: float | None
    n_steps: int
    n_llm_calls: int
    input_tokens: int | None  # None: unknown (an import with no usage), shown as such, never as 0
    output_tokens: int | None
    cost_usd: float | None
    answer: str | None
    error: str | None
    diagnoses: tuple[Diagnosis, ...]
    steps: tuple[Step, ...]
    more_steps: bool
    manifest: Manifest
    window: int | None  # the model's context window, in tokens; None for a model the window table lacks
    text_cap: int  # characters kept of each text field

    @property
    def primary(self) -> Diagnosis | None:
        return next((d for d in self.diagnoses if d.is_primary), None)


@dataclass(frozen=True)
class IndexRow:
    run_id: str
    agent: str | None
    model: str | None
    status: str | None
    label: str | None
    n_steps: int
    tokens: int | None
    cost_usd: float | None  # NULL (unknown price) is not 0
    started_at: datetime | None
    seconds: float | None
    task: str | None


@dataclass(frozen=True)
class Rollup:
    """One roll-up view (``usage_by_agent``, ...): its key column, names and rows as read."""

    by: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]


def _rows(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description or []]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _known_sum(values: Any) -> Any:
    """The sum of the known values; None (unknown, as the views keep it) when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _evidence(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {"evidence": text}
    return value if isinstance(value, dict) else {"evidence": value}


def _steps(rows: list[dict[str, Any]], failed: dict[int, str] | None = None) -> list[Step]:
    grouped: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        grouped.setdefault(int(r["step"]), []).append(r)
    steps = []
    for number, calls in grouped.items():
        first = calls[0]
        steps.append(Step(
            step=number, thought=first["thought"], thought_bytes=int(first["thought_bytes"] or 0),
            calls=tuple(
                Call(c["tool"], c["args"], int(c["args_bytes"] or 0), c["observation"],
                     int(c["observation_bytes"] or 0), bool(c["is_error"]), c["error_type"])
                for c in calls if c["tool"] is not None or c["observation"] is not None
            ),
            input_tokens=_known_sum(c["input_tokens"] for c in calls),
            output_tokens=_known_sum(c["output_tokens"] for c in calls),
            context_tokens=first["context_tokens"], cost_usd=_known_sum(c["cost_usd"] for c in calls),
            started_at=first["started_at"], ended_at=max((c["ended_at"] for c in calls if c["ended_at"]), default=None),
            call_error=(failed or {}).get(number), call_missing=bool(first.get("call_missing")),
        ))
    return steps


def _manifest(conn: duckdb.DuckDBPyConnection, run_id: str) -> Manifest:
    found = conn.execute(HAS_REDACTIONS_VIEW_SQL).fetchone()
    if found:
        view = ".".join('"' + str(part).replace('"', '""') + '"' for part in (*found, "redactions"))
        cursor = conn.execute(REDACTIONS_VIEW_SQL.format(view=view), {"run_id": run_id})
        columns = tuple(d[0] for d in cursor.description or [])
        return Manifest("redactions view", columns, tuple(tuple(r) for r in cursor.fetchall()))
    counts: dict[str, int] = {}
    for (text,) in conn.execute(REDACTION_ATTRS_SQL, {"run_id": run_id}).fetchall():
        try:
            items = json.loads(text)
        except ValueError:
            continue
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("count"), int):
                rule = str(item.get("rule"))
                counts[rule] = counts.get(rule, 0) + item["count"]
    rows = tuple(sorted(counts.items()))
    return Manifest("span attributes" if rows else "none", ("rule", "count"), rows)


def resolve_run(store: Store, run_id: str) -> list[str]:
    """The run ids ``run_id`` names: itself, or the runs it is a prefix of (at most two: ambiguous)."""
    with store.reader(locked_down=True) as conn:
        found = [r for (r,) in conn.execute(PREFIX_SQL, {"prefix": run_id}).fetchall()]
    return [run_id] if run_id in found else found


def load_report(store: Store, run_id: str, *, limit: int = STEP_LIMIT) -> RunReport | None:
    """Everything one run's page shows; None if the store has no such run."""
    with store.reader(locked_down=True) as conn:
        found = _rows(conn, RUN_SQL, {"run_id": run_id})
        if not found:
            return None
        counted = conn.execute(COUNT_CALLS_SQL, {"run_id": run_id}).fetchone()
        cap = text_cap(3 * min(int(counted[0]) if counted else 0, limit * 4))
        rows = _rows(conn, STEPS_SQL, {"run_id": run_id, "cap": cap, "limit": limit + 1})
        failed = dict(conn.execute(FAILED_CALLS_SQL, {"run_id": run_id, "limit": limit + 1}).fetchall())
        diagnoses = _rows(conn, DIAGNOSES_SQL, {"run_id": run_id})
        manifest = _manifest(conn, run_id)
    r = found[0]
    steps = _steps(rows, failed)
    found_diagnoses = tuple(Diagnosis(d["label"], bool(d["is_primary"]), d["first_step"], d["last_step"],
                                      _evidence(d["evidence"]), d["explanation"]) for d in diagnoses)
    declared = next((d.evidence.get("window_tokens") for d in found_diagnoses
                     if isinstance(d.evidence.get("window_tokens"), int)), None)
    return RunReport(
        run_id=r["run_id"], agent=r["agent"], task=r["task"], model=r["model"], status=r["status"],
        source=r["source"], parent_run_id=r["parent_run_id"], replay_of=r["replay_of"],
        forked_from=r["forked_from"], started_at=r["started_at"], ended_at=r["ended_at"], seconds=r["seconds"],
        n_steps=int(r["n_steps"] or 0), n_llm_calls=int(r["n_llm_calls"] or 0),
        input_tokens=r["input_tokens"], output_tokens=r["output_tokens"],
        cost_usd=r["cost_usd"], answer=r["answer"], error=r["error"],
        diagnoses=found_diagnoses, steps=tuple(steps[:limit]), more_steps=len(steps) > limit,
        manifest=manifest, window=declared or window_for(r["model"]),
        text_cap=cap,
    )


def load_index(store: Store, *, limit: int = INDEX_LIMIT) -> tuple[list[IndexRow], bool]:
    """One row per run, newest first, and whether more runs exist than were listed."""
    with store.reader(locked_down=True) as conn:
        rows = _rows(conn, INDEX_SQL, {"limit": limit + 1})
    return [IndexRow(**{**r, "n_steps": int(r["n_steps"] or 0)}) for r in rows[:limit]], len(rows) > limit


def load_rollups(store: Store, *, limit: int = ROLLUP_LIMIT) -> list[Rollup]:
    """Tokens and cost by agent, by model and by day, from the documented roll-up views."""
    out = []
    with store.reader(locked_down=True) as conn:
        for by, sql in ROLLUP_SQL.items():
            cursor = conn.execute(sql, {"limit": limit})
            out.append(Rollup(by, tuple(d[0] for d in cursor.description or []),
                              tuple(tuple(r) for r in cursor.fetchall())))
    return out
