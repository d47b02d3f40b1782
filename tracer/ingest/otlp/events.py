"""GenAI events sent as OTLP log records, joined to the spans they describe: pure functions.

OpenTelemetry moved message content off spans: an instrumentation may record a model call's messages as
*log records* tied to its span (same trace and span id), not as span attributes. So that one mapping
(``conventions.rows_for_trace``) serves both, the receiver and the importer *join* a trace's records to
its spans before mapping: each known event fills what the span would have carried as attributes, and
the span's own attribute wins when both are present (``SPAN_AND_EVENT`` sends both). The known events:

- the long-standing per-message events (``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``: one input message each, content in the body;
  ``gen_ai.choice``: one output choice each) become ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` in the OpenAI message shape, in the records' order;
- ``gen_ai.client.inference.operation.details`` carries the span's own attributes (messages, system
  instructions, tool definitions) as attributes: each one the span lacks is copied;
- ``gen_ai.evaluation.result`` becomes the span event of that name (what it was before logs).

Every record is kept in ``log_records`` as it came (``log_rows``), with ``status`` saying whether it
filled its span (``joined``), could not (``kept``: an unknown event, or no span of it arrived) or came
after its trace was written (``late``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from ...records.spans import PlainSpan, ts
from ...records.text import to_json

__all__ = ["PlainLog", "log_id", "join", "log_rows", "JOINED", "KEPT", "LATE", "LEGACY_MESSAGES", "CHOICE",
           "DETAILS", "EVALUATION"]

JOINED, KEPT, LATE = "joined", "kept", "late"
LEGACY_MESSAGES = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                   "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
CHOICE = "gen_ai.choice"
DETAILS = "gen_ai.client.inference.operation.details"
EVALUATION = "gen_ai.evaluation.result"
_INPUT, _OUTPUT = "gen_ai.input.messages", "gen_ai.output.messages"


@dataclass(slots=True)
class PlainLog:
    """One OTLP log record, decoded at the edge (``logs_protocol.py``) into plain values."""

    log_id: str
    trace_id: str | None
    span_id: str | None
    time_ns: int | None = None
    observed_ns: int | None = None
    event_name: str | None = None
    severity_text: str | None = None
    severity_number: int | None = None
    body: Any = None
    attributes: Mapping[str, Any] = field(default_factory=dict)
    resource: Mapping[str, Any] = field(default_factory=dict)
    scope: str | None = None
    seq: int = 0  # order of arrival (records of one span often share a timestamp)

    @property
    def at(self) -> int:
        return self.time_ns or self.observed_ns or 0


def log_id(trace_id: str | None, span_id: str | None, time_ns: int | None, observed_ns: int | None,
           event_name: str | None, severity: int | None, body: Any, attributes: Mapping[str, Any]) -> str:
    """A record's identity from its content: a record sent twice (a client's retry) has one id."""
    text = to_json([trace_id, span_id, time_ns, observed_ns, event_name, severity, body, dict(attributes)])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _message(role: str, body: Any) -> dict[str, Any]:
    """A legacy per-message event's body as an OpenAI-shaped message (what the readers know)."""
    if not isinstance(body, Mapping):
        return {"role": role, "content": body}
    out: dict[str, Any] = {"role": body.get("role") or role}
    if body.get("content") is not None:
        out["content"] = body["content"]
    if isinstance(body.get("tool_calls"), list):
        out["tool_calls"] = body["tool_calls"]
    if role == "tool" and body.get("id") is not None:
        out["tool_call_id"] = body["id"]
    return out


def _choice(body: Any) -> tuple[int, dict[str, Any], Any]:
    """(index, output message, finish reason) of a ``gen_ai.choice`` body."""
    if not isinstance(body, Mapping):
        return 0, {"role": "assistant", "content": body}, None
    message = body.get("message") if isinstance(body.get("message"), Mapping) else {}
    out = _message("assistant", message)
    out["role"] = out.get("role") or "assistant"
    if body.get("finish_reason") is not None:
        out["finish_reason"] = body["finish_reason"]
    index = body.get("index")
    return (index if isinstance(index, int) else 0), out, body.get("finish_reason")


def _fill(span: PlainSpan, logs: Sequence[PlainLog]) -> tuple[PlainSpan, set[str]]:
    """``span`` with what its records say filled in, and the ids of the records that filled it."""
    attrs = dict(span.attributes)
    events = list(span.events)
    used: set[str] = set()
    inputs: list[dict[str, Any]] = []
    choices: list[tuple[int, dict[str, Any], Any]] = []
    for record in logs:
        name = record.event_name
        if name in LEGACY_MESSAGES:
            inputs.append(_message(LEGACY_MESSAGES[name], record.body))
        elif name == CHOICE:
            choices.append(_choice(record.body))
        elif name == DETAILS:
            for key, value in record.attributes.items():
                if attrs.get(key) is None and value is not None:
                    attrs[key] = value
        elif name == EVALUATION:
            events.append({"name": EVALUATION, "time": _iso(record.at), "attributes": dict(record.attributes)})
        else:
            continue
        used.add(record.log_id)
    if inputs and attrs.get(_INPUT) is None:
        attrs[_INPUT] = inputs
    if choices and attrs.get(_OUTPUT) is None:
        choices.sort(key=lambda c: c[0])
        attrs[_OUTPUT] = [c[1] for c in choices]
        reasons = [c[2] for c in choices if c[2] is not None]
        if reasons and attrs.get("gen_ai.response.finish_reasons") is None:
            attrs["gen_ai.response.finish_reasons"] = reasons
    if not used:
        return span, used
    return replace(span, attributes=attrs, events=events), used


def join(spans: Sequence[PlainSpan], logs: Iterable[PlainLog]) -> tuple[list[PlainSpan], set[str]]:
    """``spans`` with their records' content filled in (``_fill``), and the ids of the records used."""
    by_span: dict[str, list[PlainLog]] = {}
    for record in logs:
        if record.span_id:
            by_span.setdefault(record.span_id, []).append(record)
    if not by_span:
        return list(spans), set()
    out, used = [], set()
    for s in spans:
        mine = by_span.get(s.span_id)
        if mine:
            mine.sort(key=lambda r: (r.at, r.seq))
            s, ids = _fill(s, mine)
            used |= ids
        out.append(s)
    return out, used


def _iso(ns: int) -> str | None:
    if not ns:
        return None
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def log_rows(logs: Iterable[PlainLog], status_of: Mapping[str, str], run_of: Mapping[str, str | None],
             default: str = KEPT) -> list[dict[str, Any]]:
    """``log_records`` rows: each record as it came, with its run (``run_of``: span id -> run id) and
    ``status_of`` (log id -> ``JOINED``/``KEPT``/``LATE``; else ``default``)."""
    return [{
        "log_id": r.log_id, "trace_id": r.trace_id, "span_id": r.span_id,
        "run_id": run_of.get(r.span_id) if r.span_id else None,
        "time": ts(r.time_ns), "observed_time": ts(r.observed_ns), "event_name": r.event_name,
        "severity_text": r.severity_text, "severity_number": r.severity_number,
        "body": to_json(r.body) if r.body is not None else None,
        "attributes": to_json(dict(r.attributes)) if r.attributes else None,
        "resource": to_json(dict(r.resource)) if r.resource else None, "scope": r.scope,
        "status": status_of.get(r.log_id, default),
    } for r in logs]
