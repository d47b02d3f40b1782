"""Loading a recorded run: what the loop was configured with, every model request and response,
and every tool result, checked complete enough to replay.

An incomplete recording (a killed run, a missing step, an older schema without the loop config, an
imported trajectory with no model calls) raises ``RecordingError`` naming what is missing.
"""

from __future__ import annotations

import json
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

import duckdb

from looptrace.tracer.records.requests import rebuild_requests
from looptrace.tracer.store import Store
from looptrace.tracer.records.text import canonical_json

__all__ = ["RecordingError", "RecordedCall", "RecordedTool", "Recording", "load_recording", "resolve_run"]


class RecordingError(Exception):
    """The run cannot be replayed; the message says what is missing."""


@dataclass(frozen=True)
class RecordedCall:
    step: int | None
    request: dict[str, Any]
    request_sha: str
    response: dict[str, Any] | None
    error: str | None
    input_tokens: int
    output_tokens: int
    cost_usd: float


@dataclass(frozen=True)
class RecordedTool:
    step: int
    call_index: int
    tool: str
    args: Any
    observation: str
    is_error: bool
    error_type: str | None


@dataclass
class Recording:
    run_id: str
    agent: str
    task: str
    model: str
    status: str
    config: dict[str, Any]
    calls: list[RecordedCall]
    tools: list[RecordedTool]
    n_steps: int
    answer: str | None = None
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    children: list[str] = field(default_factory=list)

    def tool_queues(self, until_step: int | None = None) -> dict[tuple[str, str], deque[RecordedTool]]:
        """Recorded results by (tool, canonical args), in the order they were produced (only those of
        steps before ``until_step`` when given)."""
        queues: dict[tuple[str, str], deque[RecordedTool]] = defaultdict(deque)
        for t in sorted(self.tools, key=lambda t: (t.step, t.call_index)):
            if until_step is not None and t.step >= until_step:
                continue
            queues[(t.tool, canonical_json(t.args))].append(t)
        return queues


_RUN_SQL = """
SELECT r.run_id, r.agent, r.task, r.model, r.status, r.answer, r.n_steps, r.cost_usd, r.input_tokens,
       r.output_tokens, (SELECT attributes FROM run_records x WHERE x.run_id = r.run_id AND attributes IS NOT NULL
                         LIMIT 1) AS attributes
FROM runs r WHERE r.run_id = ?
"""
_CALLS_SQL = """
SELECT call_id, base_call_id, params, system_sha, system, tools_sha, tools, messages_keep, messages_append,
       request_sha, response, error, step, input_tokens, output_tokens, cost_usd, messages_drop
FROM llm_call_records WHERE run_id = ? ORDER BY started_at, call_id
"""
_TOOLS_SQL = """
SELECT step, call_index, tool, args, observation, is_error, error_type
FROM tool_call_records WHERE run_id = ? ORDER BY step, call_index
"""


def resolve_run(conn: duckdb.DuckDBPyConnection, run_id: str) -> str:
    rows = conn.execute("SELECT run_id FROM runs WHERE starts_with(run_id, ?) LIMIT 2", [run_id]).fetchall()
    if not rows:
        raise RecordingError(f"no run {run_id!r} in this store")
    if len(rows) > 1:
        raise RecordingError(f"{run_id!r} matches more than one run; give more of its id")
    return str(rows[0][0])


def load_recording(store: Store, run_id: str, *, need_config: bool = True) -> Recording:
    """The recording of ``run_id``. Replaying it through the loop needs the loop's recorded
    configuration; serving its model calls (``looptrace serve``, ``need_config=False``) does not, so
    a run traced by the Anthropic instrumentor or the manual API can be served too."""
    with store.reader(locked_down=False) as conn:
        run_id = resolve_run(conn, run_id)
        run = conn.execute(_RUN_SQL, [run_id]).fetchone()
        calls = conn.execute(_CALLS_SQL, [run_id]).fetchall()
        tools = conn.execute(_TOOLS_SQL, [run_id]).fetchall()
        children = [r[0] for r in conn.execute("SELECT run_id FROM runs WHERE parent_run_id = ?", [run_id]).fetchall()]
    assert run is not None
    _, agent, task, model, status, answer, n_steps, cost, tin, tout, attributes = run
    config = (json.loads(attributes) if attributes else {}).get("config")
    if not config and need_config:
        raise RecordingError(f"run {run_id} has no recorded loop configuration (it was not run by looptrace's "
                             "loop, or by an older version): it can be analysed but not replayed")
    if not calls:
        raise RecordingError(f"run {run_id} has no recorded model calls")
    steps_seen = sorted({c[12] for c in calls if c[12] is not None})
    last = steps_seen[-1] if steps_seen else 0
    if status != "incomplete":
        last = max(last, int(n_steps or 0))  # a finished run has a model call in every step
    missing = sorted(set(range(1, last + 1)) - set(steps_seen))
    if missing:
        raise RecordingError(f"run {run_id}: no model call recorded for step(s) {', '.join(map(str, missing[:10]))}")
    rows = [
        {"call_id": c[0], "base_call_id": c[1], "params": json.loads(c[2] or "{}"), "system_sha": c[3],
         "system": json.loads(c[4]) if c[4] else None, "tools_sha": c[5], "tools": json.loads(c[6]) if c[6] else None,
         "keep": c[7], "append": json.loads(c[8] or "[]"), "drop": c[16]}
        for c in calls
    ]
    try:
        requests = rebuild_requests(rows)
    except KeyError as exc:
        raise RecordingError(f"run {run_id}: the recording is missing data: {exc.args[0]}") from exc
    recorded = [
        RecordedCall(step=c[12], request=requests[c[0]], request_sha=c[9], response=json.loads(c[10]) if c[10] else None,
                     error=c[11], input_tokens=c[13] or 0, output_tokens=c[14] or 0, cost_usd=c[15] or 0.0)
        for c in calls
    ]
    return Recording(
        run_id=run_id, agent=agent, task=task or "", model=model or "", status=status, config=config or {},
        calls=recorded,
        tools=[RecordedTool(t[0], t[1], t[2], json.loads(t[3]) if t[3] else None, t[4] or "", bool(t[5]), t[6])
               for t in tools],
        n_steps=n_steps, answer=answer, cost_usd=cost or 0.0, input_tokens=tin or 0, output_tokens=tout or 0,
        children=children,
    )
