"""A run's tool calls from its model calls' own messages: pure functions.

Step N is model call N. Its tool calls are the ones in that call's response (name, and the arguments
JSON the model sent); each one's observation is the matching tool result (by tool-call id) in a later
request, else the output of the tool span that ran it. Tool spans are joined to the calls, by id or else
by name in order within the step, so that a call is counted once and its timings come from its span;
a tool span that matches no call of the model (a response recorded without its tool calls) is still a
tool call, of the step it started in.

A call to a tool the request did not declare is ``tool_not_found``; when the request's tools were not
recorded, the framework's own words ("Unknown tool ...", in the result or in an exception event of the
run's spans) are the evidence. A framework's final-answer tool ends the run: its answer becomes the run's
answer, and its call stays a call of its step (the end tool is the evidence of a normal end the analyzer
reads, as in a code action's step). A failed call's observation is its error, when no result was recorded.

A model turn with no tool calls, followed by tool spans or sub-agent runs before the next model call, is a
code action (``code_actions.py``): what its code called are its tool calls. A tool call with no tool span
that started a sub-agent's run of its name (a smolagents managed agent, called as a tool) has that run as
its observation; the agent exists, whatever the request's recorded tools say.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import Any

from ...records import conventions as c
from ...records.spans import PlainSpan, ts
from .attributes import (
    _AGENT_NAME, _INPUT, _OUTPUT, _TOOL_CALL_ID, _error_text, _parameter_names, _span_tool_name, _tool_call,
    _unwrapped,
)
from .message_lists import _message_text
from .values import _first, _json_text, _loads, _text
from .code_actions import code_step_rows, final_of
from .frameworks import ARGUMENT_WRAPPERS, RESULT_WRAPPERS, agent_called, final_answer, is_unknown_tool
from .messages import Exchange, ToolCall

__all__ = ["tool_rows", "evidence_of"]


def evidence_of(spans: Sequence[PlainSpan]) -> list[str]:
    """Error texts of a run's spans (exception events, error statuses): a framework's word on a call."""
    texts = [s.status_message for s in spans if s.status_code == "ERROR" and s.status_message]
    for s in spans:
        for e in s.events:
            message = (e.get("attributes") or {}).get("exception.message")
            if e.get("name") == "exception" and isinstance(message, str):
                texts.append(message)
    return texts


def _tool_id(span: PlainSpan) -> str | None:
    value = _first(span.attributes, _TOOL_CALL_ID)
    return str(value) if value is not None else None


def _match(call: ToolCall, tools: list[PlainSpan], start: int, end: int | None) -> PlainSpan | None:
    """The tool span that ran ``call`` (removed from ``tools``): same id, else the first of its name
    that started within the step."""
    found = next((t for t in tools if call.id is not None and _tool_id(t) == call.id), None)
    if found is None:
        found = next((t for t in tools if _tool_id(t) is None and _span_tool_name(t) == call.name
                      and (t.start_ns or 0) >= start and (end is None or (t.start_ns or 0) < end)), None)
    if found is not None:
        tools.remove(found)
    return found


def _match_agent(call: ToolCall, agents: list[PlainSpan], start: int, end: int | None) -> PlainSpan | None:
    """The sub-agent run that ``call`` started (removed from ``agents``): the first of its name in the step."""
    found = next((r for r in agents if _within(r, start, end)
                  and agent_called(r.name, r.attributes, _AGENT_NAME) == call.name), None)
    if found is not None:
        agents.remove(found)
    return found


def _span_result(span: PlainSpan) -> str | None:
    key = next((k for k in _OUTPUT if span.attributes.get(k) is not None), None)
    if key is None:
        return None
    return _text(_unwrapped(span.attributes[key], RESULT_WRAPPERS))


def _error_type(call: ToolCall, x: Exchange, observation: str | None, span: PlainSpan | None,
                evidence: Sequence[str]) -> str | None:
    if x.declared is not None and call.name not in x.declared:
        return c.TOOL_NOT_FOUND
    if x.declared is None and (is_unknown_tool(observation, call.name)
                               or any(is_unknown_tool(text, call.name) for text in evidence)):
        return c.TOOL_NOT_FOUND
    if span is not None and (span.status_code == "ERROR" or span.attributes.get(c.ERROR_TYPE) is not None):
        exception = next((e.get("attributes") or {} for e in span.events if e.get("name") == "exception"), {})
        return str(span.attributes.get(c.ERROR_TYPE) or exception.get("exception.type") or "tool_error")
    return None


def _within(span: PlainSpan, start: int, end: int | None) -> bool:
    return start <= (span.start_ns or 0) and (end is None or (span.start_ns or 0) < end)


def tool_rows(run_id: str, models: Sequence[PlainSpan], exchanges: Sequence[Exchange],
              tools: Sequence[PlainSpan], evidence: Sequence[str], moved: dict[str, set[str]],
              subruns: Sequence[PlainSpan] = (), step_spans: Mapping[str, PlainSpan] | None = None,
              ) -> tuple[list[dict[str, Any]], tuple[bool, Any]]:
    """The run's tool_call_records rows, and (True, the answer) if a final-answer tool ended it.
    ``subruns`` are the spans of the sub-agent runs it started outside any tool span, ``step_spans`` the
    framework's step span around each model call (by the model span's id), where it has one."""
    unmatched = sorted(tools, key=lambda t: (t.start_ns or 0, t.span_id))
    agents = sorted(subruns, key=lambda t: (t.start_ns or 0, t.span_id))
    rows: list[dict[str, Any]] = []
    answer: tuple[bool, Any] = (False, None)
    for i, (model, x) in enumerate(zip(models, exchanges)):
        start = model.start_ns or 0
        end = models[i + 1].start_ns if i + 1 < len(models) else None
        index = 0
        if not x.tool_calls:  # a code action, if its code ran anything (code_actions.py)
            ran = [t for t in unmatched if _within(t, start, end)]
            started = [r for r in agents if _within(r, start, end)]
            code_rows, done = code_step_rows(run_id, i + 1, model, _message_text(x.output), ran, started,
                                             (step_spans or {}).get(model.span_id), end is None, moved)
            for t in ran:
                unmatched.remove(t)
            for r in started:
                agents.remove(r)
            rows.extend(code_rows)
            answer = done if done[0] else answer
            continue
        for call in x.tool_calls:
            span = _match(call, unmatched, start, end)
            # A managed agent called as a tool (smolagents): no tool span, its run is the call.
            agent = _match_agent(call, agents, start, end) if span is None else None
            arguments = _loads(call.arguments) if call.arguments is not None else None
            done, value = final_answer(call.name, arguments)
            if done:
                answer = (True, value)
            later = (y.results[call.id] for y in exchanges[i + 1:] if call.id is not None and call.id in y.results)
            observation = next(later, None)
            if observation is None and (span or agent) is not None:
                observation = _span_result(span or agent)  # type: ignore[arg-type]
            if span is not None:
                moved.setdefault(span.span_id, set()).update(
                    k for k in (*_OUTPUT, "input.value", *_INPUT[:2]) if k in span.attributes)
            args = call.arguments
            if args is None and span is not None:
                raw = _first(span.attributes, _INPUT)
                names = _parameter_names(span.attributes)
                args = _json_text(_unwrapped(raw, ARGUMENT_WRAPPERS, names)) if raw is not None else None
            ran_as = span or agent
            # An agent that ran exists, whatever the request declared (OpenInference lists tools only).
            error_type = _error_type(call, x if agent is None else Exchange(None, None), observation, ran_as,
                                     evidence if agent is None else ())
            if observation is None and ran_as is not None and error_type not in (None, c.TOOL_NOT_FOUND):
                observation = _error_text(ran_as)  # what failed, where the framework kept no result
            if observation is None and error_type == c.TOOL_NOT_FOUND:  # what the framework told the model
                observation = next((t for t in evidence if is_unknown_tool(t, call.name)), None)
            rows.append({
                "run_id": run_id, "step": i + 1, "call_index": index, "tool_call_id": call.id, "tool": call.name,
                "args": _json_text(args) if args is not None else None, "observation": observation,
                "observation_bytes": len(observation.encode("utf-8")) if observation is not None else 0,
                "is_error": error_type is not None, "error_type": error_type,
                "started_at": ts(ran_as.start_ns if ran_as is not None else model.end_ns),
                "ended_at": ts(ran_as.end_ns if ran_as is not None else end),
                "span_id": ran_as.span_id if ran_as is not None else None,
            })
            index += 1
    starts = [m.start_ns or 0 for m in models]
    for span in unmatched:
        step = max(1, bisect.bisect_right(starts, span.start_ns or 0))
        index = sum(1 for r in rows if r["step"] == step)
        rows.append(_tool_call(span, run_id, step, index, moved.setdefault(span.span_id, set())))
        done, value = final_of(rows[-1], span)
        answer = (True, value) if done else answer
    rows.sort(key=lambda r: (r["step"], r["call_index"]))
    return rows, answer
