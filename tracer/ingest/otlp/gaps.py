"""Model calls a trace lost, found in the requests of the calls it kept: pure functions.

A client drops a span batch now and then (an exporter that gave up on a collector that was away, a
full queue, a request over the size limit), and with it a model call's span. Steps are model calls
(``steps.py``), so the lost call's step vanished, and its tool span, matched to no call, was filed
under the previous step: that step looked like it had done the work twice, and the analyzer read
a run that never happened.

The calls that were kept say what was lost: every tool call was asked for by some model call, and
each request repeats the conversation so far. An assistant message in a later request whose tool
calls (by id) no kept response made is the response of a lost call, with its thought and tool calls;
the results follow it in the same request. Such a call becomes a step of its own, placed before the
first kept call whose request shows it, with no model call row and a ``model_call_missing`` event, so
the gap is shown, never filled in silently. Calls without tool-call ids leave no such trace and
cannot be found this way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...records.conventions import MODEL_CALL_MISSING
from ...records.spans import PlainSpan
from .messages import Exchange, tool_calls_in

__all__ = ["Lost", "lost_calls", "missing_event", "placeholder"]


@dataclass(frozen=True)
class Lost:
    """A model call the trace lost: before ``before`` (an index into the kept calls), ``exchange`` as read
    from the request of that call, at ``at_ns`` (its first tool span's start, else just before that call)."""

    before: int
    exchange: Exchange
    at_ns: int | None


def _assistant_turns(messages: Sequence[Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, m) for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "assistant"]


def _after(previous: Exchange, messages: Sequence[Any]) -> int:
    """Where, in ``messages`` (a later request), what came after the ``previous`` kept call starts: past that
    call's own response, found by its tool-call ids, else past its request when this one continues it. A
    request that does not continue it (a history cut or rewritten) shows nothing: its end."""
    ids = {call.id for call in previous.tool_calls if call.id is not None}
    for i in range(len(messages) - 1, -1, -1) if ids else ():  # from the end: it is the latest turns
        m = messages[i]
        if isinstance(m, dict) and m.get("role") == "assistant" and any(c.id in ids for c in tool_calls_in([m])):
            return i + 1
    n = len(previous.messages or ())
    return n if previous.messages is not None and list(messages[:n]) == list(previous.messages) else len(messages)


def lost_calls(models: Sequence[PlainSpan], exchanges: Sequence[Exchange], tools: Sequence[PlainSpan],
               tool_id: Callable[[PlainSpan], Any], elsewhere: Callable[[], set[str]]) -> list[Lost]:
    """The calls missing between the kept ``models`` (in order, with their ``exchanges``). ``tools`` are the
    run's tool spans and ``tool_id`` reads a tool span's call id (for the lost step's time); ``elsewhere()``
    gives the tool-call ids the rest of the trace made (another agent's turns in a shared history): read
    only when this run's own calls leave some unexplained, which is rare."""
    made = {call.id for x in exchanges for call in x.tool_calls if call.id is not None}
    others: set[str] | None = None
    found: list[Lost] = []
    for j, x in enumerate(exchanges):
        if j == 0 or not x.messages:
            continue  # what came before the run's first kept call is the history it was given
        begin = _after(exchanges[j - 1], x.messages)
        for index, message in _assistant_turns(x.messages[begin:]):
            index += begin
            calls = [call for call in tool_calls_in([message]) if call.id is not None]
            if not calls or any(call.id in made for call in calls):
                continue  # a kept call's response (or one without ids: no evidence either way)
            others = elsewhere() if others is None else others
            if any(call.id in others for call in calls):
                continue  # another agent's turn
            made.update(call.id for call in calls if call.id is not None)
            ids = {call.id for call in calls}
            starts = [t.start_ns for t in tools if tool_id(t) in ids and t.start_ns]
            at = min(starts) if starts else (models[j].start_ns - 1 if models[j].start_ns else None)
            found.append(Lost(j, Exchange(list(x.messages[:index]) if x.messages else None, [message],
                                          tool_calls_in([message]), {}, x.declared), at))
    return found


def placeholder(lost: Lost, trace_id: str, key: str) -> PlainSpan:
    """A stand-in for the lost call's span, so it takes its place among the kept calls (no row is made of it)."""
    return PlainSpan(trace_id, key, None, MODEL_CALL_MISSING, start_ns=lost.at_ns, end_ns=lost.at_ns)


def missing_event(lost: Lost) -> dict[str, Any]:
    """The ``model_call_missing`` step event: what shows the gap, and the evidence for it."""
    time = (datetime.fromtimestamp(lost.at_ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat(sep=" ")
            if lost.at_ns else None)
    return {"name": MODEL_CALL_MISSING, "time": time, "attributes": {
        "reason": "the trace has no span of this step's model call (a span batch the client dropped); "
                  "its response is read from a later request",
        "tool_call_ids": [c.id for c in lost.exchange.tool_calls if c.id is not None]}}
