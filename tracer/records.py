"""Spans to store rows: a pure mapping from plain span data to rows of the base tables.

Every span becomes a row of ``spans``; the spans that looptrace's conventions name (invoke_agent,
looptrace.step, chat, execute_tool) also become typed rows of run, step, LLM-call and tool-call
records. Large content attributes are moved to those typed columns rather than stored twice.
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
from .textsafe import clean_text, to_json

__all__ = ["PlainSpan", "attributes_of", "events_of", "from_readable", "rows_for_spans", "run_start_row", "ts"]


# Not frozen: a frozen dataclass's __init__ costs 6x more, paid for every span the exporter writes.
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
    ctx = span.context
    parent = span.parent
    status = span.status
    scope = span.instrumentation_scope
    resource = span.resource
    events = events_of(span)
    return PlainSpan(
        "%032x" % ctx.trace_id if ctx else "",
        "%016x" % ctx.span_id if ctx else "",
        "%016x" % parent.span_id if parent else None,
        span.name,
        _KIND_NAMES[span.kind],
        span.start_time,
        span.end_time,
        _STATUS_NAMES[status.status_code],
        status.description,
        attributes_of(span),
        [{"name": e.name, "time": _iso(e.timestamp), "attributes": dict(e.attributes or {})}
         for e in events] if events else (),
        resource.attributes if resource else {},
        scope.name if scope else None,
    )


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
    """What a run records beyond the columns: its loop configuration (for replay)."""
    config = attrs.get(c.RUN_CONFIG)
    return to_json({"config": json.loads(config)}) if isinstance(config, str) else None


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


def _step_row(s: PlainSpan) -> dict[str, Any]:
    a = s.attributes
    return {
        "run_id": a.get(c.RUN_ID),
        "step": _int(a.get(c.STEP_INDEX)),
        "started_at": ts(s.start_ns),
        "ended_at": ts(s.end_ns),
        "thought": _text(a.get(c.STEP_THOUGHT)),
        "input_tokens": _int(a.get(c.GEN_AI_USAGE_INPUT_TOKENS)),
        "output_tokens": _int(a.get(c.GEN_AI_USAGE_OUTPUT_TOKENS)),
        "context_tokens": _int(a.get(c.STEP_CONTEXT_TOKENS)),
        "cost_usd": a.get(c.STEP_COST),
        "events": to_json(s.events) if s.events else None,
        "span_id": s.span_id,
    }


def _tool_row(s: PlainSpan) -> dict[str, Any]:
    a = s.attributes
    observation = _text(a.get(c.GEN_AI_TOOL_CALL_RESULT))
    error_type = a.get(c.ERROR_TYPE)
    return {
        "run_id": a.get(c.RUN_ID),
        "step": _int(a.get(c.STEP_INDEX)),
        "call_index": _int(a.get(c.TOOL_CALL_INDEX)) or 0,
        "tool_call_id": a.get(c.GEN_AI_TOOL_CALL_ID),
        "tool": a.get(c.GEN_AI_TOOL_NAME),
        "args": _json_attr(a.get(c.GEN_AI_TOOL_CALL_ARGUMENTS)),
        "observation": observation,
        "observation_bytes": _utf8_size(observation) if observation is not None
        else _int(a.get(c.TOOL_RESULT_BYTES)) or 0,
        "is_error": bool(a.get(c.TOOL_IS_ERROR)) or error_type is not None,
        "error_type": error_type,
        "started_at": ts(s.start_ns),
        "ended_at": ts(s.end_ns),
        "span_id": s.span_id,
    }


def _llm_row(s: PlainSpan) -> dict[str, Any]:
    a = s.attributes
    return {
        "run_id": a.get(c.RUN_ID),
        "step": _int(a.get(c.STEP_INDEX)),
        "call_id": s.span_id,
        "base_call_id": a.get(c.LLM_BASE_CALL),
        "provider": a.get(c.GEN_AI_PROVIDER),
        "model": a.get(c.GEN_AI_REQUEST_MODEL),
        "response_model": a.get(c.GEN_AI_RESPONSE_MODEL),
        "started_at": ts(s.start_ns),
        "ended_at": ts(s.end_ns),
        "params": _json_attr(a.get(c.LLM_PARAMS)),
        "system_sha": a.get(c.LLM_SYSTEM_SHA),
        "system": _json_attr(a.get(c.LLM_SYSTEM)),
        "tools_sha": a.get(c.LLM_TOOLS_SHA),
        "tools": _json_attr(a.get(c.LLM_TOOLS)),
        "messages_keep": _int(a.get(c.LLM_MESSAGES_KEEP)),
        "messages_append": _json_attr(a.get(c.LLM_MESSAGES_APPEND)),
        "request_sha": a.get(c.LLM_REQUEST_SHA),
        "response": _json_attr(a.get(c.LLM_RESPONSE)),
        "stop_reason": (list(a.get(c.GEN_AI_RESPONSE_FINISH_REASONS) or []) or [None])[0],
        "input_tokens": _int(a.get(c.GEN_AI_USAGE_INPUT_TOKENS)),
        "output_tokens": _int(a.get(c.GEN_AI_USAGE_OUTPUT_TOKENS)),
        "cache_read_tokens": _int(a.get(c.GEN_AI_USAGE_CACHE_READ)),
        "cache_creation_tokens": _int(a.get(c.GEN_AI_USAGE_CACHE_CREATION)),
        "cost_usd": a.get(c.LLM_COST),
        "retries": _int(a.get(c.LLM_RETRIES)) or 0,
        "error": _text(a.get(c.LLM_ERROR) or (s.status_message if s.status_code == "ERROR" else None)),
        "span_id": s.span_id,
    }


def _span_row(s: PlainSpan, resources: dict[int, str | None]) -> dict[str, Any]:
    kept = {k: v for k, v in s.attributes.items() if k not in c.MOVED_TO_COLUMNS}
    return {
        "trace_id": s.trace_id,
        "span_id": s.span_id,
        "parent_span_id": s.parent_span_id,
        "name": s.name,
        "kind": s.kind,
        "start_time": ts(s.start_ns),
        "end_time": ts(s.end_ns),
        "status_code": s.status_code,
        "status_message": _text(s.status_message),
        "run_id": s.attributes.get(c.RUN_ID),
        "attributes": to_json(kept),
        "events": to_json(s.events) if s.events else None,
        "resource": _resource_json(s.resource, resources),
        "scope": s.scope,
    }


def _resource_json(resource: Mapping[str, Any], cache: dict[int, str | None]) -> str | None:
    """A batch's spans share one resource: encode it once."""
    key = id(resource)
    if key not in cache:
        cache[key] = to_json(dict(resource)) if resource else None
    return cache[key]


_TYPED = {
    c.OP_INVOKE_AGENT: ("run_records", _run_end_row),
    c.OP_CHAT: ("llm_call_records", _llm_row),
    c.OP_EXECUTE_TOOL: ("tool_call_records", _tool_row),
}


def rows_for_spans(spans: Iterable[PlainSpan]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"spans": []}
    resources: dict[int, str | None] = {}
    for s in spans:
        out["spans"].append(_span_row(s, resources))
        op = str(s.attributes.get(c.GEN_AI_OPERATION))
        if s.attributes.get(c.RUN_ID) is None:
            continue  # not part of a looptrace run (e.g. the anthropic SDK's own span): `spans` only
        if s.name == c.STEP_SPAN:
            table, make = "step_records", _step_row
        elif (typed := _TYPED.get(op)) is not None:
            table, make = typed
        else:
            continue
        out.setdefault(table, []).append(make(s))
    return out
