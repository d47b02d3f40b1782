"""Spans of other instrumentations as looptrace runs, steps, model calls and tool calls: pure functions.

Three conventions describe agent loops in spans: the OTel GenAI semantic conventions, OpenInference
(Arize Phoenix) and OpenLLMetry (Traceloop). ``classify`` reduces a span of any of them to a role: an
agent (a run), a workflow (a run only if it makes calls itself), a model call or a tool call; the
readers in ``attributes.py`` know each convention's attribute names. A framework's envelope around one
agent and a graph's nodes of kind AGENT are not runs (``frameworks.py``). None of the conventions says
what a step is, so steps are derived the way looptrace's own loop defines them: within a run, each model
call (one per call, however many instrumentors reported it) opens a step. Its tool calls are read from
the model's own messages when the responses are known (``steps.py``); otherwise a tool span belongs to
the step of the last model call started before it (tool spans before any model call form a leading step).
Model calls with no span around them, one trace each, are grouped into runs first (``conversations.py``).

Rows are derived from a whole trace at once: the same spans always give the same rows and ids, which
is what lets the receiver (which buffers a trace until its root arrives) and the OTLP JSON importer
agree, and a trace never be mapped twice. Every span is kept in ``spans``; a span of no known
convention only there. Spans of looptrace's own conventions (``looptrace.run.id``) are left to
``tracer.records.rows_for_spans``.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...records import conventions as c
from ...records.spans import PlainSpan, rows_for_spans, ts
from ...records.requests import RequestLog
from ...records.text import to_json
from .frameworks import agent_called, is_envelope, is_graph_node
from .messages import Exchange, exchange_of, fill_outputs
from .code_actions import final_of
from .steps import evidence_of, tool_rows
from .gaps import Lost, lost_calls, missing_event, placeholder
from .attributes import (  # the span readers, shared within this package
    AGENT, INVOKE_WORKFLOW, MODEL, OI_KIND, TL_KIND, TOOL, WORKFLOW, _AGENT_NAME, _INPUT_TOKENS, _TOOL_CALL_ID,
    _MODEL_NAME, _OUTPUT_TOKENS, _model_call, _tool_call, classify, is_native, run_id_for,
)
from .message_lists import _message_text, _messages, _user_text
from .values import _first, _int, _loads, _safe_json, _text

__all__ = ["AGENT", "WORKFLOW", "MODEL", "TOOL", "classify", "run_id_for", "rows_for_trace", "is_native"]

# The agent a model or tool span names as its caller (GenAI, OpenInference, OpenLLMetry's propagated workflow);
# not ``traceloop.entity.name``, which on a call's span names the tool or task itself.
_CALLS_AGENT = tuple(k for k in _AGENT_NAME if k != "traceloop.entity.name")


def _call_id(span: PlainSpan) -> Any:
    return _first(span.attributes, _TOOL_CALL_ID)


def _order(s: PlainSpan) -> tuple[int, str]:
    return (s.start_ns or 0, s.span_id)


class _Trace:
    """One trace's span tree: each span's role, and each call's run and enclosing calls."""

    def __init__(self, spans: Sequence[PlainSpan]) -> None:
        self.by_id = {s.span_id: s for s in spans}
        self.roles = {s.span_id: classify(s) for s in spans}
        self.children: dict[str | None, list[PlainSpan]] = {}
        for s in sorted(spans, key=_order):
            parent = s.parent_span_id if s.parent_span_id in self.by_id else None  # orphans start a tree
            self.children.setdefault(parent, []).append(s)
        self.run_of_call: dict[str, str] = {}  # call span id -> its run span id ("" for the trace's root)
        self.enclosing: dict[str, tuple[str, ...]] = {}  # call span id -> the calls of its run around it
        seen: set[str] = set()
        # Top-down and iterative (traces can be deep). A span in a parent cycle is started over as a root.
        for start in (*self.children.get(None, []), *sorted(spans, key=_order)):
            stack: list[tuple[PlainSpan, str | None, str | None, tuple[str, ...]]] = [(start, None, None, ())]
            while stack:
                span, agent, workflow, calls = stack.pop()
                if span.span_id in seen:
                    continue
                seen.add(span.span_id)
                role = self.roles[span.span_id]
                if role == AGENT and (is_envelope(span.name) or agent is not None
                                      and is_graph_node(_loads(span.attributes.get("metadata")))):
                    role = self.roles[span.span_id] = None  # a framework's wrapper or graph node: not a run
                if role == AGENT:
                    agent, calls = span.span_id, ()
                elif role == WORKFLOW and agent is None and workflow is None:
                    workflow = span.span_id  # the outermost one: nested chains are its parts
                elif role in (MODEL, TOOL):
                    self.run_of_call[span.span_id] = agent or workflow or ""
                    self.enclosing[span.span_id] = calls
                    calls = (*calls, span.span_id)
                children = reversed(self.children.get(span.span_id, []))
                stack.extend((child, agent, workflow, calls) for child in children)

    def calls_by_run(self) -> dict[str, list[PlainSpan]]:
        """Run span id -> the calls that make its steps. A call inside another call of the same run is
        part of it (one model call seen by two instrumentations, a tool's own work), except that a tool
        span around a model call is a wrapper (an OpenLLMetry ``task``), not a tool call."""
        wrappers = {p for cid, around in self.enclosing.items() if self.roles[cid] == MODEL
                    for p in around if self.roles[p] == TOOL}
        out: dict[str, list[PlainSpan]] = {}
        for cid, around in self.enclosing.items():
            if cid not in wrappers and all(p in wrappers for p in around):
                out.setdefault(self.run_of_call[cid], []).append(self.by_id[cid])
        return out

    def run_of(self, span_id: str | None, runs: Mapping[str, str], default: str | None) -> str | None:
        """The run of a span: the nearest of itself and its ancestors that is a run span."""
        for _ in range(len(self.by_id) + 1):  # bounded: parent ids may form a cycle
            if span_id is None or span_id not in self.by_id:
                break
            if span_id in runs:
                return runs[span_id]
            span_id = self.by_id[span_id].parent_span_id
        return default


@dataclass
class _Run:
    run_id: str
    span: PlainSpan | None  # None when the trace's root never arrived
    role: str | None
    calls: list[PlainSpan] = field(default_factory=list)
    parent_run_id: str | None = None
    members: list[PlainSpan] = field(default_factory=list)  # every span of the run (for error evidence)
    subruns: list[PlainSpan] = field(default_factory=list)  # child runs it started outside a tool span
    step_spans: dict[str, PlainSpan] = field(default_factory=dict)  # model span id -> the step span around it


def _runs(trace: _Trace, trace_id: str) -> tuple[dict[str, _Run], str | None]:
    """Runs by run span id, and the id of the trace-level run (for spans under no run span), if any."""
    calls = trace.calls_by_run()
    keys = [sid for sid, role in trace.roles.items() if role == AGENT or (role == WORKFLOW and (
        sid in calls or trace.by_id[sid].attributes.get(c.GEN_AI_OPERATION) == INVOKE_WORKFLOW))]
    runs = {sid: _Run(run_id_for(trace_id, sid), trace.by_id[sid], trace.roles[sid], calls.get(sid, []))
            for sid in keys}
    trace_run = None
    if "" in calls:  # calls under no agent or workflow: the trace's root is their run
        tops = trace.children.get(None, [])
        root = next((s for s in tops if not s.parent_span_id), None)
        key = root.span_id if root else next((s.parent_span_id for s in tops if s.parent_span_id), "")
        if key in runs:  # the root is a workflow, and some calls lost the spans between them and it
            runs[key].calls = [*runs[key].calls, *calls[""]]
        else:
            runs[key] = _Run(run_id_for(trace_id, key), root, None, calls[""])
        trace_run = runs[key].run_id
    ids = {sid: run.run_id for sid, run in runs.items()}
    by_run_id = {run.run_id: run for run in runs.values()}
    for run in runs.values():
        if run.span is not None:
            parent = trace.run_of(run.span.parent_span_id, ids, None)
            run.parent_run_id = parent if parent != run.run_id else None
            if run.parent_run_id in by_run_id and not _in_a_call(trace, run.span):
                by_run_id[run.parent_run_id].subruns.append(run.span)  # started from code (code_actions.py)
        for call in run.calls:
            around = trace.by_id.get(call.parent_span_id or "")
            if around is not None and trace.roles.get(around.span_id) == WORKFLOW and around is not run.span:
                run.step_spans[call.span_id] = around
    return runs, trace_run


def _in_a_call(trace: _Trace, span: PlainSpan) -> bool:
    """Whether a run's span sits in a model or tool call of its parent run (a tool that runs an agent is
    that call), rather than directly in the parent's steps."""
    parent = span.parent_span_id
    for _ in range(len(trace.by_id)):  # bounded: parent ids may form a cycle
        if parent is None or parent not in trace.by_id:
            return False
        role = trace.roles.get(parent)
        if role in (MODEL, TOOL):
            return True
        if role == AGENT:
            return False
        parent = trace.by_id[parent].parent_span_id
    return False


_SAME_REQUEST_NS = 50_000_000  # two spans of one request start this close (instrumentor and SDK)


def _one_per_call(models: list[PlainSpan], exchanges: list[Exchange]) -> list[int]:
    """Indexes of the model calls to keep: one per call, however many instrumentors reported it (same
    response id, or the same request started within ``_SAME_REQUEST_NS``). The fuller record wins."""
    keep: list[int] = []
    for i, x in enumerate(exchanges):
        twin = next((k for k in keep if (x.response_id is not None and x.response_id == exchanges[k].response_id)
                     or (x.messages is not None and x.messages == exchanges[k].messages
                         and abs((models[i].start_ns or 0) - (models[k].start_ns or 0)) < _SAME_REQUEST_NS)), None)
        if twin is None:
            keep.append(i)
        elif _fullness(x) > _fullness(exchanges[twin]):
            keep[keep.index(twin)] = i
    return sorted(keep)


def _fullness(x: Exchange) -> int:
    return (x.messages is not None) + (x.output is not None) + (x.declared is not None)


def _calls_made(spans: Sequence[PlainSpan], run: _Run) -> set[str]:
    """Tool-call ids that the model and tool spans of the trace outside ``run`` name: calls another agent
    made (a team's shared history, a handoff), which are never a lost call of ``run``."""
    own = {s.span_id for s in run.calls}
    ids: set[str] = set()
    for s in spans:
        role = None if s.span_id in own else classify(s)
        if role == MODEL:
            ids.update(call.id for call in exchange_of(s.attributes).tool_calls if call.id is not None)
        elif role == TOOL and (value := _call_id(s)) is not None:
            ids.add(str(value))
    return ids


def _run_rows(run: _Run, source: str, spans: Sequence[PlainSpan],
              moved: dict[str, set[str]]) -> dict[str, list[dict[str, Any]]]:
    log = RequestLog()
    models = sorted((x for x in run.calls if classify(x) == MODEL), key=_order)
    tools = sorted((x for x in run.calls if classify(x) != MODEL), key=_order)
    exchanges = [exchange_of(m.attributes) for m in models]
    kept = _one_per_call(models, exchanges)
    models, exchanges = [models[i] for i in kept], [exchanges[i] for i in kept]
    # Steps from the model's own messages when its responses are known (recorded or read from the next
    # request); else from tool spans.
    from_messages = fill_outputs(exchanges)
    # Calls the trace lost (a dropped span batch), read from later requests: each a step of its own (gaps.py).
    missing: dict[str, Lost] = {}
    if from_messages:
        found = lost_calls(models, exchanges, tools, _call_id, lambda: _calls_made(spans, run))
        for k, lost in reversed(list(enumerate(found))):
            stand_in = placeholder(lost, spans[0].trace_id, f"{c.MODEL_CALL_MISSING}:{k}")
            models.insert(lost.before, stand_in)
            exchanges.insert(lost.before, lost.exchange)
            missing[stand_in.span_id] = lost
    starts = [m.start_ns or 0 for m in models]
    lead = int(not from_messages and bool(tools) and (not models or (tools[0].start_ns or 0) < starts[0]))
    steps: dict[int, dict[str, Any]] = {}
    llm_rows, tool_rows_, first_task = [], [], None
    for i, m in enumerate(models):
        if m.span_id in missing:  # no model call row: the step, its thought, and the gap shown
            lost = missing[m.span_id]
            steps[i + 1] = _step_row(run.run_id, i + 1, ts(m.start_ns), ts(m.end_ns), None,
                                     thought=_message_text(lost.exchange.output))
            steps[i + 1]["events"] = to_json([missing_event(lost)])
            continue
        row, thought, task = _model_call(m, run.run_id, i + 1 + lead, log, moved.setdefault(m.span_id, set()))
        llm_rows.append(row)
        first_task = first_task or task
        steps[row["step"]] = _step_row(run.run_id, row["step"], row["started_at"], row["ended_at"], m.span_id,
                                       thought=thought, tokens=(row["input_tokens"], row["output_tokens"]),
                                       cost=row["cost_usd"])
    final: tuple[bool, Any] = (False, None)
    if from_messages:
        tool_rows_, final = tool_rows(run.run_id, models, exchanges, tools, evidence_of(run.members or run.calls),
                                      moved, run.subruns, run.step_spans)
    else:
        counts: dict[int, int] = {}
        for t in tools:
            step = bisect.bisect_right(starts, t.start_ns or 0) + lead
            counts[step] = counts.get(step, -1) + 1
            tool_rows_.append(_tool_call(t, run.run_id, step, counts[step], moved.setdefault(t.span_id, set())))
            done, value = final_of(tool_rows_[-1], t)
            final = (True, value) if done else final
    for row in tool_rows_:
        s = steps.setdefault(row["step"], _step_row(run.run_id, row["step"], row["started_at"], None, None))
        if row["ended_at"] is not None and (s["ended_at"] is None or row["ended_at"] > s["ended_at"]):
            s["ended_at"] = row["ended_at"]
    last = steps[max(steps)] if steps else None
    with_tools = {row["step"] for row in tool_rows_}
    answer = last["thought"] if last and last["step"] not in with_tools else None
    run_row = _run_row(run, source, spans, models, first_task, answer)
    if final[0]:  # the framework's final-answer tool says it, whatever its agent span records
        run_row["answer"] = _text(final[1])
    elif from_messages and answer is not None:  # the model's last words, not a framework's state object
        run_row["answer"] = answer
    return {"run_records": [run_row],
            "step_records": [steps[k] for k in sorted(steps)], "llm_call_records": llm_rows,
            "tool_call_records": tool_rows_}


def _step_row(run_id: str, step: int, started: int | None, ended: int | None, span_id: str | None, *,
              thought: str | None = None, tokens: tuple[int | None, int | None] = (None, None),
              cost: float | None = None) -> dict[str, Any]:
    return {"run_id": run_id, "step": step, "started_at": started, "ended_at": ended, "thought": thought,
            "input_tokens": tokens[0], "output_tokens": tokens[1], "context_tokens": tokens[0],
            "cost_usd": cost, "events": None, "span_id": span_id}


def _run_row(run: _Run, source: str, spans: Sequence[PlainSpan], models: Sequence[PlainSpan],
             task: str | None, answer: str | None) -> dict[str, Any]:
    s = run.span
    a: Mapping[str, Any] = s.attributes if s is not None else {}
    service = next((x.resource.get("service.name") for x in spans if x.resource.get("service.name")), None)
    # Until the root arrives (a run still going), the agent is the one its calls name, not the process's
    # service.name: an `agent:` filter finds the run while it runs. The root's own name wins once it lands.
    called = None if s is not None else next(
        (str(v) for x in sorted(run.calls, key=_order) if (v := _first(x.attributes, _CALLS_AGENT))), None)
    # An agent's span is named for it (smolagents: "file_agent.run", the agent its manager calls "file_agent").
    named = agent_called(s.name, {}, ()) if s is not None and run.role is not None else None
    ended = s is not None and s.end_ns is not None
    failed = ended and s is not None and s.status_code == "ERROR"
    starts = [x.start_ns for x in run.calls if x.start_ns]
    last_seen = max((x.end_ns or x.start_ns or 0 for x in run.calls), default=0)
    return {
        "run_id": run.run_id, "recorded_at": ts(s.end_ns if ended and s is not None else last_seen),
        "parent_run_id": run.parent_run_id, "source": source,
        "agent": _text(_first(a, _AGENT_NAME) or named or called or service or (s.name if s is not None else None)),
        "task": _text(_first(a, ("input.value", "traceloop.entity.input"))
                      or _user_text(_messages(a, "gen_ai.input.messages", ())[0]) or task),
        "model": _text(_first(a, _MODEL_NAME) or next((_first(m.attributes, _MODEL_NAME) for m in models),
                                                      None)),
        "strategy": None, "status": ("error" if failed else "ok") if ended else None,
        "answer": _text(_first(a, ("output.value", "traceloop.entity.output"))
                        or _message_text(_messages(a, "gen_ai.output.messages", ())[0]) or answer),
        "error": _text(s.status_message or a.get(c.ERROR_TYPE) or "error") if failed and s else None,
        "started_at": ts(s.start_ns if s is not None else min(starts, default=None)),
        "ended_at": ts(s.end_ns) if ended and s is not None else None,
        "replay_of": None, "forked_from": None, "fork_step": None, "trace_id": spans[0].trace_id,
        "span_id": s.span_id if s is not None else None, "pid": None,
        "attributes": to_json({"convention": _convention(run)}),
        "input_tokens": _int(_first(a, _INPUT_TOKENS)), "output_tokens": _int(_first(a, _OUTPUT_TOKENS)),
        "cost_usd": None,
    }


def _convention(run: _Run) -> str:
    """Which convention the run's spans follow (recorded in ``run_records.attributes``)."""
    for span in ([run.span] if run.span is not None else []) + run.calls:
        a = span.attributes
        if OI_KIND in a:
            return "openinference"
        if TL_KIND in a or "llm.request.type" in a:
            return "openllmetry"
        if c.GEN_AI_OPERATION in a:
            return "gen_ai"
    return "unknown"


def _span_rows(spans: Sequence[PlainSpan], run_of: Mapping[str, str | None],
               moved: Mapping[str, set[str]]) -> list[dict[str, Any]]:
    """``spans`` rows, without the attributes whose content is held by typed columns."""
    trimmed = [replace(s, attributes={k: v for k, v in s.attributes.items() if k not in moved[s.span_id]})
               if moved.get(s.span_id) else s for s in spans]
    rows = rows_for_spans(trimmed)["spans"]
    for row in rows:
        row["run_id"] = run_of.get(row["span_id"])
    return rows


def rows_for_trace(spans: Sequence[PlainSpan], *, source: str,
                   stored: Mapping[str, str | None] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Rows (table -> rows) for the spans of one trace; ``source`` goes into ``runs.source``.

    ``stored`` maps the span ids of this trace already in the store to their run. Those spans are
    skipped, and the others (spans that came after their trace was written) are kept in ``spans``
    only, under the run of their nearest stored ancestor: the trace's runs and steps exist already,
    and deriving them again would add them twice.
    """
    new = [s for s in {s.span_id: s for s in spans}.values() if not stored or s.span_id not in stored]
    if not new:
        return {}
    if any(is_native(s) for s in new):
        return _safe_json(rows_for_spans(new))
    if stored:
        by_id = {s.span_id: s for s in new}
        late: dict[str, str | None] = {}
        for s in new:
            parent, hops = s.parent_span_id, 0
            while parent in by_id and hops <= len(by_id):
                parent, hops = by_id[parent].parent_span_id, hops + 1
            late[s.span_id] = stored.get(parent) if parent else None
        return {"spans": _span_rows(new, late, {})}
    trace = _Trace(new)
    runs, trace_run = _runs(trace, new[0].trace_id)
    out: dict[str, list[dict[str, Any]]] = {}
    moved: dict[str, set[str]] = {}
    ids = {sid: run.run_id for sid, run in runs.items()}
    run_of = {s.span_id: trace.run_of(s.span_id, ids, trace_run) for s in new}
    by_run = {run.run_id: run for run in runs.values()}
    for s in new:
        if run_of[s.span_id] in by_run:
            by_run[run_of[s.span_id]].members.append(s)
    for run in runs.values():
        for table, rows in _run_rows(run, source, new, moved).items():
            out.setdefault(table, []).extend(rows)
    out["spans"] = _span_rows(new, run_of, moved)
    return out
