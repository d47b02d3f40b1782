"""Spans to store rows: a pure mapping from plain span data to rows of the base tables.

Every span becomes a row of ``spans``; the spans that looptrace's conventions name (invoke_agent,
looptrace.step, chat, execute_tool) also become typed rows of run, step, LLM-call and tool-call
records. Large content attributes are moved to those typed columns rather than stored twice.

The mapping works on a batch, column by column (``SpanBatch`` -> ``columns_for_batch``), since the
exporter runs it for thousands of spans a second; ``rows_for_spans`` gives the same as dicts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from . import conventions as c
from .text import clean_text, to_json

__all__ = [
    "Columns", "PlainSpan", "SpanBatch", "as_rows", "attributes_of", "columns_for_batch", "events_of", "from_readable",
    "rows_for_spans", "run_start_row", "ts",
]


# Not frozen: a frozen dataclass's __init__ costs 6x more, paid for every span received over OTLP.
# Treat it as a value all the same (``dataclasses.replace`` for a changed copy).
@dataclass(slots=True)
class PlainSpan:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: str = "INTERNAL"
    start_ns: int | None = None
    end_ns: int | None = None
    status_code: str = "UNSET"
    status_message: str | None = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    events: Sequence[dict[str, Any]] = ()
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None


def ts(ns: int | None) -> int | None:
    """A stored timestamp (microseconds since the epoch, UTC) from nanoseconds; Arrow converts it."""
    return None if ns is None else ns // 1000


def attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """An ended span's attributes. They are immutable by then, so the plain dict behind them is
    shared, not copied (a copy through the public view costs more than the rest of ``from_readable``)."""
    attributes = getattr(span, "_attributes", None)
    return getattr(attributes, "_dict", None) or dict(span.attributes or {})


def events_of(span: ReadableSpan) -> Sequence[Event]:
    events = getattr(span, "_events", None)  # the ``events`` view copies them, even when there are none
    return span.events if events is None else events


def from_readable(span: ReadableSpan) -> PlainSpan:
    return SpanBatch.of_readable([span]).span(0)


_KIND_NAMES = {kind: kind.name for kind in SpanKind}
_STATUS_NAMES = {code: code.name for code in StatusCode}


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def _json_attr(value: Any) -> Any:
    """looptrace's JSON attributes are written by ``to_json``: store the text as it is."""
    if value is None or isinstance(value, str):
        return value
    return to_json(value)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))  # a 10 MB log is not encoded


def _text(value: Any) -> str | None:
    return None if value is None else clean_text(value)


def run_start_row(attrs: Mapping[str, Any], *, trace_id: str, span_id: str, start_ns: int | None) -> dict[str, Any]:
    return {
        "run_id": attrs.get(c.RUN_ID),
        "recorded_at": ts(start_ns),
        "parent_run_id": attrs.get(c.RUN_PARENT_ID),
        "source": attrs.get(c.RUN_SOURCE, "looptrace"),
        "agent": attrs.get(c.GEN_AI_AGENT_NAME),
        "task": _text(attrs.get(c.RUN_TASK)),
        "model": attrs.get(c.GEN_AI_REQUEST_MODEL),
        "strategy": attrs.get(c.RUN_STRATEGY),
        "status": None,
        "started_at": ts(start_ns),
        "ended_at": None,
        "replay_of": attrs.get(c.RUN_REPLAY_OF),
        "forked_from": attrs.get(c.RUN_FORKED_FROM),
        "fork_step": _int(attrs.get(c.RUN_FORK_STEP)),
        "trace_id": trace_id,
        "span_id": span_id,
        "pid": _int(attrs.get(c.RUN_PID)),
        "attributes": _run_attributes(attrs),
    }


def _run_attributes(attrs: Mapping[str, Any]) -> str | None:
    """What a run records beyond the columns: its loop configuration (for replay), and the guard it was
    held to (the analyzer applies the guard's thresholds to it, so the two agree on the run)."""
    out = {key: json.loads(value) for key, attr in (("config", c.RUN_CONFIG), ("guard", c.RUN_GUARD))
           if isinstance(value := attrs.get(attr), str)}
    return to_json(out) if out else None


def _run_end_row(s: PlainSpan) -> dict[str, Any]:
    a = s.attributes
    row = run_start_row(a, trace_id=s.trace_id, span_id=s.span_id, start_ns=s.start_ns)
    row.update(
        recorded_at=ts(s.end_ns),
        status=a.get(c.RUN_STATUS, "error" if s.status_code == "ERROR" else "ok"),
        answer=_text(a.get(c.RUN_ANSWER)),
        error=_text(a.get(c.RUN_ERROR) or (s.status_message if s.status_code == "ERROR" else None)),
        ended_at=ts(s.end_ns),
    )
    return row


Columns = dict[str, list[Any]]  # one table's rows, column by column


@dataclass(slots=True)
class SpanBatch:
    """A batch of spans, field by field. The exporter converts thousands of spans a second: a
    comprehension per column costs about half of a dict per row (and ``Table.from_pylist`` taking
    the dicts apart again), and 13 lists are all the cycle collector has to look at."""

    trace_id: list[str]
    span_id: list[str]
    parent_span_id: list[str | None]
    name: list[str]
    kind: list[str]
    start_ns: list[int | None]
    end_ns: list[int | None]
    status_code: list[str]
    status_message: list[str | None]
    attributes: list[Mapping[str, Any]]
    events: list[Sequence[dict[str, Any]]]
    resource: list[Mapping[str, Any]]
    scope: list[str | None]

    @classmethod
    def of_plain(cls, spans: Sequence[PlainSpan]) -> SpanBatch:
        return cls(*([getattr(s, f) for s in spans] for f in _FIELDS))

    @classmethod
    def of_readable(cls, spans: Sequence[ReadableSpan]) -> SpanBatch:
        contexts = [s.context for s in spans]
        parents = [s.parent for s in spans]
        statuses = [s.status for s in spans]
        scopes = [s.instrumentation_scope for s in spans]
        return cls(
            ["%032x" % x.trace_id if x else "" for x in contexts],
            ["%016x" % x.span_id if x else "" for x in contexts],
            ["%016x" % x.span_id if x else None for x in parents],
            [s.name for s in spans],
            [_KIND_NAMES[s.kind] for s in spans],
            [s.start_time for s in spans],
            [s.end_time for s in spans],
            [_STATUS_NAMES[x.status_code] for x in statuses],
            [x.description for x in statuses],
            [attributes_of(s) for s in spans],
            [_plain_events(events_of(s)) for s in spans],
            [s.resource.attributes if s.resource else {} for s in spans],
            [x.name if x else None for x in scopes],
        )

    def __len__(self) -> int:
        return len(self.span_id)

    def span(self, i: int) -> PlainSpan:
        return PlainSpan(*(getattr(self, f)[i] for f in _FIELDS))

    def put(self, i: int, span: PlainSpan) -> None:
        for f in _FIELDS:
            getattr(self, f)[i] = getattr(span, f)


_FIELDS = tuple(PlainSpan.__dataclass_fields__)


def _plain_events(events: Sequence[Event]) -> Sequence[dict[str, Any]]:
    if not events:
        return ()
    return [{"name": e.name, "time": _iso(e.timestamp), "attributes": dict(e.attributes or {})} for e in events]


def _micros(values: list[int | None]) -> list[int | None]:
    """Stored timestamps (see ``ts``) for a column of nanoseconds."""
    return [None if ns is None else ns // 1000 for ns in values]


def _events_json(events: Sequence[dict[str, Any]]) -> str | None:
    return to_json(events) if events else None


def _span_columns(b: SpanBatch, started: list[int | None], ended: list[int | None]) -> Columns:
    resources: dict[int, str | None] = {}
    return {
        "trace_id": b.trace_id,
        "span_id": b.span_id,
        "parent_span_id": b.parent_span_id,
        "name": b.name,
        "kind": b.kind,
        "start_time": started,
        "end_time": ended,
        "status_code": b.status_code,
        "status_message": [_text(m) for m in b.status_message],
        "run_id": [a.get(c.RUN_ID) for a in b.attributes],
        "attributes": [to_json({k: v for k, v in a.items() if k not in c.MOVED_TO_COLUMNS}) for a in b.attributes],
        "events": [_events_json(e) for e in b.events],
        "resource": [_resource_json(r, resources) for r in b.resource],
        "scope": b.scope,
    }


def _step_columns(b: SpanBatch, idx: list[int], started: list[int | None], ended: list[int | None],
                  context: str = c.STEP_CONTEXT_TOKENS, cost: str = c.STEP_COST) -> Columns:
    a = [b.attributes[i] for i in idx]
    return {
        "run_id": [x.get(c.RUN_ID) for x in a],
        "step": [_int(x.get(c.STEP_INDEX)) for x in a],
        "started_at": [started[i] for i in idx],
        "ended_at": [ended[i] for i in idx],
        "thought": [_text(x.get(c.STEP_THOUGHT)) for x in a],
        "input_tokens": [_int(x.get(c.GEN_AI_USAGE_INPUT_TOKENS)) for x in a],
        "output_tokens": [_int(x.get(c.GEN_AI_USAGE_OUTPUT_TOKENS)) for x in a],
        "context_tokens": [_int(x.get(context)) for x in a],
        "cost_usd": [x.get(cost) for x in a],
        "events": [_events_json(b.events[i]) for i in idx],
        "span_id": [b.span_id[i] for i in idx],
    }


def _call_step_columns(b: SpanBatch, idx: list[int], started: list[int | None], ended: list[int | None]) -> Columns:
    """The step rows of chat spans that are their step too (``looptrace.step.of_call``: a client
    instrumentor's call, spans/callstep.py): the columns a ``looptrace.step`` span of the same
    interval, thought, usage and cost would give (the call's input is the step's context)."""
    return _step_columns(b, idx, started, ended, context=c.GEN_AI_USAGE_INPUT_TOKENS, cost=c.LLM_COST)


def _tool_columns(b: SpanBatch, idx: list[int], started: list[int | None], ended: list[int | None]) -> Columns:
    a = [b.attributes[i] for i in idx]
    observations = [_text(x.get(c.GEN_AI_TOOL_CALL_RESULT)) for x in a]
    error_types = [x.get(c.ERROR_TYPE) for x in a]
    return {
        "run_id": [x.get(c.RUN_ID) for x in a],
        "step": [_int(x.get(c.STEP_INDEX)) for x in a],
        "call_index": [_int(x.get(c.TOOL_CALL_INDEX)) or 0 for x in a],
        "tool_call_id": [x.get(c.GEN_AI_TOOL_CALL_ID) for x in a],
        "tool": [x.get(c.GEN_AI_TOOL_NAME) for x in a],
        "args": [_json_attr(x.get(c.GEN_AI_TOOL_CALL_ARGUMENTS)) for x in a],
        "observation": observations,
        # Without the result (no-content mode) the size the tracer recorded stands in.
        "observation_bytes": [_utf8_size(o) if o is not None else _int(x.get(c.TOOL_RESULT_BYTES)) or 0
                              for o, x in zip(observations, a)],
        "is_error": [bool(x.get(c.TOOL_IS_ERROR)) or e is not None for x, e in zip(a, error_types)],
        "error_type": error_types,
        "started_at": [started[i] for i in idx],
        "ended_at": [ended[i] for i in idx],
        "span_id": [b.span_id[i] for i in idx],
    }


def _llm_columns(b: SpanBatch, idx: list[int], started: list[int | None], ended: list[int | None]) -> Columns:
    a = [b.attributes[i] for i in idx]
    failed = [b.status_message[i] if b.status_code[i] == "ERROR" else None for i in idx]
    return {
        "run_id": [x.get(c.RUN_ID) for x in a],
        "step": [_int(x.get(c.STEP_INDEX)) for x in a],
        "call_id": [b.span_id[i] for i in idx],
        "base_call_id": [x.get(c.LLM_BASE_CALL) for x in a],
        "provider": [x.get(c.GEN_AI_PROVIDER) for x in a],
        "model": [x.get(c.GEN_AI_REQUEST_MODEL) for x in a],
        "response_model": [x.get(c.GEN_AI_RESPONSE_MODEL) for x in a],
        "started_at": [started[i] for i in idx],
        "ended_at": [ended[i] for i in idx],
        "params": [_json_attr(x.get(c.LLM_PARAMS)) for x in a],
        "system_sha": [x.get(c.LLM_SYSTEM_SHA) for x in a],
        "system": [_json_attr(x.get(c.LLM_SYSTEM)) for x in a],
        "tools_sha": [x.get(c.LLM_TOOLS_SHA) for x in a],
        "tools": [_json_attr(x.get(c.LLM_TOOLS)) for x in a],
        "messages_keep": [_int(x.get(c.LLM_MESSAGES_KEEP)) for x in a],
        "messages_drop": [_int(x.get(c.LLM_MESSAGES_DROP)) for x in a],
        "messages_append": [_json_attr(x.get(c.LLM_MESSAGES_APPEND)) for x in a],
        "request_sha": [x.get(c.LLM_REQUEST_SHA) for x in a],
        "response": [_json_attr(x.get(c.LLM_RESPONSE)) for x in a],
        "stop_reason": [(list(x.get(c.GEN_AI_RESPONSE_FINISH_REASONS) or []) or [None])[0] for x in a],
        "input_tokens": [_int(x.get(c.GEN_AI_USAGE_INPUT_TOKENS)) for x in a],
        "output_tokens": [_int(x.get(c.GEN_AI_USAGE_OUTPUT_TOKENS)) for x in a],
        "cache_read_tokens": [_int(x.get(c.GEN_AI_USAGE_CACHE_READ)) for x in a],
        "cache_creation_tokens": [_int(x.get(c.GEN_AI_USAGE_CACHE_CREATION)) for x in a],
        "cost_usd": [x.get(c.LLM_COST) for x in a],
        "retries": [_int(x.get(c.LLM_RETRIES)) or 0 for x in a],
        "error": [_text(x.get(c.LLM_ERROR) or f) for x, f in zip(a, failed)],
        "span_id": [b.span_id[i] for i in idx],
    }


def _run_columns(b: SpanBatch, idx: list[int], started: list[int | None], ended: list[int | None]) -> Columns:
    # A run ends once: its rows are few, so they are made one by one, as at its start.
    rows = [_run_end_row(b.span(i)) for i in idx]
    return {k: [r[k] for r in rows] for k in rows[0]}


def _resource_json(resource: Mapping[str, Any], cache: dict[int, str | None]) -> str | None:
    """A batch's spans share one resource: encode it once."""
    key = id(resource)
    if key not in cache:
        cache[key] = to_json(dict(resource)) if resource else None
    return cache[key]


_TYPED = {
    c.OP_INVOKE_AGENT: ("run_records", _run_columns),
    c.OP_CHAT: ("llm_call_records", _llm_columns),
    c.OP_EXECUTE_TOOL: ("tool_call_records", _tool_columns),
}


def columns_for_batch(batch: SpanBatch) -> dict[str, Columns]:
    """The store's rows for a batch of spans, table by table and column by column."""
    started, ended = _micros(batch.start_ns), _micros(batch.end_ns)
    typed: dict[str, list[int]] = {}
    for i, (name, attrs) in enumerate(zip(batch.name, batch.attributes)):
        if attrs.get(c.RUN_ID) is None:
            continue  # not part of a looptrace run (e.g. the anthropic SDK's own span): `spans` only
        if name == c.STEP_SPAN:
            typed.setdefault("step_records", []).append(i)
        elif (kind := _TYPED.get(str(attrs.get(c.GEN_AI_OPERATION)))) is not None:
            typed.setdefault(kind[0], []).append(i)
            if attrs.get(c.STEP_OF_CALL):
                typed.setdefault("call_steps", []).append(i)
    out = {"spans": _span_columns(batch, started, ended)}
    makers = {"step_records": _step_columns, **dict(_TYPED.values())}
    call_steps = typed.pop("call_steps", None)
    for table, idx in typed.items():
        out[table] = makers[table](batch, idx, started, ended)
    if call_steps:
        steps = _call_step_columns(batch, call_steps, started, ended)
        if "step_records" in out:
            for column, values in out["step_records"].items():
                values.extend(steps[column])
        else:
            out["step_records"] = steps
    return out


def as_rows(tables: Mapping[str, Columns]) -> dict[str, list[dict[str, Any]]]:
    return {table: [dict(zip(cols, values)) for values in zip(*cols.values())] for table, cols in tables.items()}


def rows_for_spans(spans: Iterable[PlainSpan]) -> dict[str, list[dict[str, Any]]]:
    """``columns_for_batch`` as rows (dicts), for code that works on rows: importers, OTLP ingest."""
    return as_rows(columns_for_batch(SpanBatch.of_plain(list(spans))))
