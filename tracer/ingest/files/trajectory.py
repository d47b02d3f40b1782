"""Runs recorded by other agents, as plain data, and their rows in the store.

Importers turn a file into ``Trajectory`` values (pure parsing, no I/O beyond reading the file);
``trajectory_rows`` maps one to records, which ``importing.py`` hands to the sink.

Values are honest: what a file does not record (tokens, cost, times) stays ``None`` and lands as
NULL, never as 0 or the import time; a model call with tokens and no recorded cost is priced from the
price table, as a traced call is (NULL for a model with no price). A run's id hashes its ``origin`` (the file's content digest,
set by ``formats.parse_file``, or an id the source itself made globally unique, such as an Inspect
sample's uuid) and its ``key`` inside the file, so the same content imported twice, under any path,
is the same run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


from ...records.pricing import counted_cost
from ...records.text import clean_text, to_json

__all__ = ["ImportedLLMCall", "ImportedStep", "Trajectory", "imported_run_id", "trajectory_rows", "estimate_tokens"]


def estimate_tokens(text_chars: int) -> int:
    """Tokens from characters when a source records none: 4 characters a token, the usual rule of
    thumb for English text and code with BPE tokenizers (documented in docs/schema.md)."""
    return (text_chars + 3) // 4


def imported_run_id(origin: str, key: str) -> str:
    """The id of the run ``key`` of ``origin``: how a file can name a run of another file whose origin
    it knows (a forked session names its origin session)."""
    # Keys hold whatever text the file holds (a sub-run's key has its agent's name), lone surrogates
    # included: "surrogatepass" hashes them as they are, so such a file imports and two keys that
    # differ only there keep different ids (issue 39: a strict encode raised, the file was skipped).
    return hashlib.sha256(f"{origin}\0{key}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


@dataclass
class ImportedStep:
    step: int
    thought: str | None = None
    tool: str | None = None
    args: Any = None
    observation: str | None = None
    is_error: bool = False
    error_type: str | None = None  # tool_not_found, invalid_arguments, unparseable, ...
    context_tokens: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    call_index: int = 0
    tool_call_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    agent: str | None = None  # in a multi-agent log, the agent whose turn this is
    role: str | None = None  # the speaker as the log wrote it, when it says more (``Orchestrator (thought)``)
    events: list[dict[str, Any]] = field(default_factory=list)  # ``{name, time, attributes}`` the file records


@dataclass
class ImportedLLMCall:
    """One model call a file records with its usage (Inspect model events, Claude Code messages).
    ``input_tokens`` include the cache reads and writes (docs/schema.md), whatever the source's count."""

    step: int | None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    cost_usd: float | None = None
    stop_reason: str | None = None
    error: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None


@dataclass
class Trajectory:
    source: str  # the path of the file it came from
    agent: str
    status: str
    steps: list[ImportedStep] = field(default_factory=list)
    task: str | None = None
    model: str | None = None
    answer: str | None = None
    error: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    attributes: dict[str, Any] = field(default_factory=dict)  # e.g. the source's own exit status
    key: str = ""  # distinguishes several runs in one file
    llm_calls: list[ImportedLLMCall] = field(default_factory=list)
    origin: str = ""  # what the run id hashes: the content digest, or a namespace for a source-made id
    parent_key: str | None = None  # the key of the run (in the same file) this one is a sub-run of
    forked_from: str | None = None  # the run id of the run this one was forked from (another file's)

    def _id(self, key: str) -> str:
        return imported_run_id(self.origin or self.source, key)

    @property
    def run_id(self) -> str:
        return self._id(self.key)

    @property
    def parent_run_id(self) -> str | None:
        return None if self.parent_key is None else self._id(self.parent_key)


def _step_events(s: ImportedStep) -> str | None:
    """A multi-agent step names its agent in an ``agent`` event (steps have no agent column); other
    events are the file's own (a response's full token usage)."""
    events = list(s.events)
    if s.agent is not None:
        attributes = {"agent": s.agent, **({"role": s.role} if s.role else {})}
        events.insert(0, {"name": "agent", "time": None, "attributes": attributes})
    return to_json(events) if events else None


def _text(value: Any) -> str | None:
    return None if value is None else clean_text(value)


def trajectory_rows(t: Trajectory, *, imported_at: datetime) -> dict[str, list[dict[str, Any]]]:
    # Every text a file can hold goes through ``_text``: a name with a lone surrogate (or a path with
    # undecodable bytes) is stored as valid Unicode, never refused by the writer (issue 39).
    run_id = t.run_id
    run = {
        "run_id": run_id, "recorded_at": imported_at, "source": _text(t.source), "agent": _text(t.agent),
        "task": _text(t.task), "model": _text(t.model), "strategy": None, "status": t.status,
        "answer": _text(t.answer), "error": _text(t.error),
        "parent_run_id": t.parent_run_id, "forked_from": t.forked_from, "started_at": t.started_at,
        "ended_at": t.ended_at,
        "attributes": to_json(t.attributes) if t.attributes else None,
        "input_tokens": t.input_tokens, "output_tokens": t.output_tokens, "cost_usd": t.cost_usd,
    }
    steps: dict[int, dict[str, Any]] = {}
    calls = []
    for s in t.steps:
        row = steps.setdefault(s.step, {
            "run_id": run_id, "step": s.step, "started_at": s.started_at, "ended_at": s.ended_at,
            "thought": _text(s.thought),
            "input_tokens": s.input_tokens, "output_tokens": s.output_tokens, "context_tokens": s.context_tokens,
            "cost_usd": None, "events": _step_events(s), "span_id": None,
        })
        if row["thought"] is None and s.thought:
            row["thought"] = _text(s.thought)
        if s.ended_at is not None and (row["ended_at"] is None or s.ended_at > row["ended_at"]):
            row["ended_at"] = s.ended_at
        if s.tool is not None or s.observation is not None:
            observation = _text(s.observation)
            calls.append({
                "run_id": run_id, "step": s.step, "call_index": s.call_index, "tool_call_id": _text(s.tool_call_id),
                "tool": _text(s.tool), "args": to_json(s.args) if s.args is not None else None,
                "observation": observation,
                "observation_bytes": len(observation.encode("utf-8")) if observation else 0,
                "is_error": s.is_error or s.error_type is not None, "error_type": _text(s.error_type),
                "started_at": s.started_at, "ended_at": s.ended_at, "span_id": None,
            })
    llm = [{
        "run_id": run_id, "step": c.step, "call_id": f"{run_id}:{i}", "provider": None, "model": _text(c.model),
        "response_model": _text(c.model), "started_at": c.started_at, "ended_at": c.ended_at,
        "stop_reason": _text(c.stop_reason), "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
        "cache_read_tokens": c.cache_read_tokens, "cache_creation_tokens": c.cache_creation_tokens,
        # A cost the file recorded is the source's own; else the tokens priced, as a traced call is.
        "cost_usd": c.cost_usd if c.cost_usd is not None else counted_cost(
            c.model or t.model, c.input_tokens, c.output_tokens, c.cache_read_tokens, c.cache_creation_tokens),
        "error": _text(c.error), "span_id": None,
    } for i, c in enumerate(t.llm_calls)]
    out = {"run_records": [run], "step_records": list(steps.values()), "tool_call_records": calls}
    if llm:
        out["llm_call_records"] = llm
    return out

