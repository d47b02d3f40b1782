"""Model calls with no span around them, grouped into the runs they were: pure functions.

An agent loop written against a bare SDK (a ``while`` around ``chat.completions.create``) under an SDK
instrumentor sends each model call as a trace of its own, a root with nothing above it. Mapped one trace
at a time, every call would be a run of one step. A *loose call* is such a trace: every root span is a
model call and no span is an agent or a workflow. Loose calls are grouped into one run by conversation:

1. Calls of the same service that share ``gen_ai.conversation.id`` (or a session id) are one run.
2. Else the message chain: a call joins the run whose latest call's request messages are a prefix of its
   own (the next request repeats the history and adds the response and tool results), provided it
   started within ``window_ns`` of that call, in the same service.
3. A call that repeats another's ``gen_ai.response.id``, or the same request started within milliseconds,
   is the same call seen by a second instrumentor (OpenLLMetry and the anthropic SDK's own span): it goes
   with that call, and the mapping stores the call once.

Limits: two loops of the same service that send the very same first request within the window are taken
for one run unless they send a conversation id; a loop that rewrites its history (drops or summarises old
messages) starts a new run at the rewrite; calls recorded without their messages can only be joined by id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...records.spans import PlainSpan
from .attributes import AGENT, MODEL, WORKFLOW, classify
from .message_lists import _message_text
from .messages import Exchange, exchange_of

__all__ = ["CONVERSATION_WINDOW_NS", "is_loose_call", "group_conversations"]

CONVERSATION_WINDOW_NS = 600 * 1_000_000_000  # a tool may run for minutes between two model calls
_SAME_REQUEST_NS = 50_000_000
_CONVERSATION_KEYS = ("gen_ai.conversation.id", "session.id", "llm.session.id", "traceloop.association.properties.session_id")


def is_loose_call(spans: Sequence[PlainSpan]) -> bool:
    """A trace whose roots are all model calls, with no agent or workflow span: one call of a bare loop."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_span_id or s.parent_span_id not in ids]
    roles = [classify(s) for s in spans]
    return bool(roots) and all(classify(r) == MODEL for r in roots) and not any(r in (AGENT, WORKFLOW) for r in roles)


@dataclass
class _Call:
    spans: list[PlainSpan]
    root: PlainSpan
    service: Any
    conversation: Any
    exchange: Exchange


@dataclass
class _Chain:
    service: Any
    calls: list[_Call] = field(default_factory=list)


def _signature(messages: Sequence[Any]) -> list[tuple[Any, str | None]]:
    """Messages as (role, text): what stays the same when a history is sent again."""
    return [(m.get("role"), (_message_text([m]) or "")[:500]) if isinstance(m, dict) else (None, str(m)[:500])
            for m in messages]


def _extends(last: Exchange, x: Exchange) -> bool:
    if last.messages is None or x.messages is None or len(x.messages) <= len(last.messages):
        return False
    return _signature(x.messages[:len(last.messages)]) == _signature(last.messages)


def _same_call(a: _Call, b: _Call) -> bool:
    if a.exchange.response_id is not None and a.exchange.response_id == b.exchange.response_id:
        return True
    close = abs((a.root.start_ns or 0) - (b.root.start_ns or 0)) < _SAME_REQUEST_NS
    return close and a.exchange.messages is not None and a.exchange.messages == b.exchange.messages


def group_conversations(traces: Sequence[Sequence[PlainSpan]], *,
                        window_ns: int = CONVERSATION_WINDOW_NS) -> list[list[PlainSpan]]:
    """Loose-call traces (see ``is_loose_call``) as groups of spans, one group per run, in start order."""
    calls = []
    for spans in traces:
        ids = {s.span_id for s in spans}
        root = min((s for s in spans if not s.parent_span_id or s.parent_span_id not in ids),
                   key=lambda s: (s.start_ns or 0, s.span_id))
        a = root.attributes
        conversation = next((str(a[k]) for k in _CONVERSATION_KEYS if a.get(k)), None)  # untrusted types
        calls.append(_Call(list(spans), root, str(root.resource.get("service.name")), conversation, exchange_of(a)))
    calls.sort(key=lambda c: (c.root.start_ns or 0, c.root.span_id))
    chains: list[_Chain] = []
    by_conversation: dict[tuple[Any, Any], _Chain] = {}
    for call in calls:
        chain = next((ch for ch in chains if ch.service == call.service
                      and any(_same_call(other, call) for other in ch.calls[-3:])), None)
        if chain is None and call.conversation is not None:
            chain = by_conversation.get((call.service, call.conversation))
        if chain is None and call.exchange.messages is not None:
            chain = next((ch for ch in reversed(chains) if ch.service == call.service
                          and (call.root.start_ns or 0) - (ch.calls[-1].root.start_ns or 0) <= window_ns
                          and _extends(_last_with_messages(ch), call.exchange)), None)
        if chain is None:
            chain = _Chain(call.service)
            chains.append(chain)
        chain.calls.append(call)
        if call.conversation is not None:
            by_conversation.setdefault((call.service, call.conversation), chain)
    return [[s for c in ch.calls for s in c.spans] for ch in chains]


def _last_with_messages(chain: _Chain) -> Exchange:
    return next((c.exchange for c in reversed(chain.calls) if c.exchange.messages is not None),
                chain.calls[-1].exchange)
