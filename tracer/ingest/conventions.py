"""Spans of other instrumentations as looptrace runs, steps, model calls and tool calls: pure functions.

Three conventions describe agent loops in spans: the OTel GenAI semantic conventions, OpenInference
(Arize Phoenix) and OpenLLMetry (Traceloop). ``classify`` reduces a span of any of them to a role: an
agent (a run), a workflow (a run only if it makes calls itself), a model call or a tool call; the
``_model`` and ``_tool`` readers know each convention's attribute names. None of them says what a step
is, so steps are derived the way looptrace's own loop defines them: within a run, model calls ordered
by start time each open a step, and a tool call belongs to the step of the last model call started
before it (tool calls before any model call form a leading step).

Rows are derived from a whole trace at once: the same spans always give the same rows and ids, which
is what lets the receiver (which buffers a trace until its root arrives) and the OTLP JSON importer
agree, and a trace never be mapped twice. Every span is kept in ``spans``; a span of no known
convention only there. Spans of looptrace's own conventions (``looptrace.run.id``) are left to
``tracer.records.rows_for_spans``.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import conventions as c
from ..pricing import cost_usd, price_of
from ..records import PlainSpan, rows_for_spans, ts
from ..requests import RequestLog
from ..textsafe import clean_text, to_json

__all__ = ["AGENT", "WORKFLOW", "MODEL", "TOOL", "classify", "run_id_for", "rows_for_trace", "is_native"]

AGENT, WORKFLOW, MODEL, TOOL = "agent", "workflow", "model", "tool"
_GENAI_OPS = {c.OP_INVOKE_AGENT: AGENT, c.OP_CHAT: MODEL, "text_completion": MODEL,
              "generate_content": MODEL, c.OP_EXECUTE_TOOL: TOOL}
_OPENINFERENCE = {"AGENT": AGENT, "CHAIN": WORKFLOW, "LLM": MODEL, "TOOL": TOOL}
_TRACELOOP = {"agent": AGENT, "workflow": WORKFLOW, "task": TOOL, "tool": TOOL}
OI_KIND, TL_KIND = "openinference.span.kind", "traceloop.span.kind"
# Attribute names, each list in order of preference across the three conventions.
_MODEL_NAME = ("gen_ai.request.model", "llm.request.model_name", "llm.model_name", "gen_ai.response.model")
_RESPONSE_MODEL = ("gen_ai.response.model", "llm.response.model_name", "llm.response.model")
_PROVIDER = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_INPUT_TOKENS = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.usage.prompt_tokens",
                 "llm.token_count.prompt")
_OUTPUT_TOKENS = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                  "llm.usage.completion_tokens", "llm.token_count.completion")
_CACHE_READ = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens",
               "llm.token_count.prompt_details.cache_read")
_CACHE_WRITE = ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_creation_input_tokens",
                "llm.token_count.prompt_details.cache_write")
_AGENT_NAME = ("gen_ai.agent.name", "agent.name", "traceloop.entity.name", "traceloop.workflow.name")
_TOOL_NAME = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
_TOOL_CALL_ID = ("gen_ai.tool.call.id", "tool_call.id", "tool.id")
_INPUT = ("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")
_OUTPUT = ("gen_ai.tool.call.result", "output.value", "traceloop.entity.output")
_GENAI_PARAMS = ("max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "frequency_penalty",
                 "presence_penalty", "seed", "choice.count")
# Flattened lists: OpenInference (llm.input_messages.0.message.role), OpenLLMetry (gen_ai.prompt.0.role).
_INPUT_PREFIXES = ("llm.input_messages", "gen_ai.prompt")
_OUTPUT_PREFIXES = ("llm.output_messages", "gen_ai.completion")
_TOOLS_PREFIXES = ("llm.tools", "llm.request.functions")
_INT64 = 1 << 63
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # valid for Python's json, refused by DuckDB's
# JSON columns that tracer.records fills from attributes as they are: checked when the spans are untrusted.
_JSON_COLUMNS = {"tool_call_records": ("args",), "run_records": ("attributes",), "step_records": ("events",),
                 "llm_call_records": ("params", "system", "tools", "messages_append", "response")}


def is_native(span: PlainSpan) -> bool:
    """Traced by looptrace itself: ``tracer.records`` maps it."""
    return isinstance(span.attributes.get(c.RUN_ID), str)


def classify(span: PlainSpan) -> str | None:
    """``AGENT``, ``WORKFLOW``, ``MODEL``, ``TOOL``, or None for a span of no known convention."""
    a = span.attributes
    op = a.get(c.GEN_AI_OPERATION)
    if op in _GENAI_OPS:
        return _GENAI_OPS[str(op)]
    if OI_KIND in a:
        return _OPENINFERENCE.get(str(a[OI_KIND]).upper())
    if TL_KIND in a:
        return _TRACELOOP.get(str(a[TL_KIND]).lower())
    # OpenLLMetry's model-call spans carry no kind, only request and usage attributes.
    if a.get("llm.request.type") in ("chat", "completion") or "gen_ai.usage.prompt_tokens" in a:
        return MODEL
    return None


def run_id_for(trace_id: str, span_id: str) -> str:
    """The id of the run of ``span_id`` (an agent span or a trace's root): the same on every derivation."""
    return hashlib.sha256(f"otlp\0{trace_id}\0{span_id}".encode()).hexdigest()[:32]


def _first(a: Mapping[str, Any], keys: Iterable[str]) -> Any:
    return next((a[k] for k in keys if a.get(k) is not None), None)


def _int(value: Any) -> int | None:
    """A count for a BIGINT column, or None (not a number, or out of range)."""
    try:
        number = int(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is None or -_INT64 <= number < _INT64 else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return clean_text(value) if isinstance(value, (str, bytes)) else to_json(value)


def _loads(value: Any) -> Any:
    """A JSON attribute (GenAI records messages as JSON text); anything else as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return value


def _refuse(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON, and DuckDB's JSON type refuses them


def _json_text(value: Any) -> str | None:
    """JSON text for a JSON column: a string that already is JSON as written, anything else encoded."""
    if value is None:
        return None
    if isinstance(value, str):
        parsed = _loads(value)
        if parsed is not value:
            return to_json(parsed) if _SURROGATE_ESCAPE.search(value) else clean_text(value)
    return to_json(value)


def _safe_json(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``rows`` with every JSON column holding valid JSON: one bad cell would fail its whole segment."""
    for table, columns in _JSON_COLUMNS.items():
        for row in rows.get(table, ()):
            for column in columns:
                if row.get(column) is not None:
                    row[column] = _json_text(row[column])
    return rows


def _nested(a: Mapping[str, Any], prefix: str) -> tuple[Any, list[str]]:
    """The flattened attributes under ``prefix`` as nested data (numeric keys become lists), and the keys
    it holds. A key that clashes with another (``x`` and ``x.y``) is left out, so it stays in ``spans``."""
    head = prefix + "."
    root: dict[str, Any] = {}
    placed = []
    for key in sorted(k for k in a if k.startswith(head)):
        node: Any = root
        *path, leaf = key[len(head):].split(".")
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            if leaf not in node:
                node[leaf] = a[key]
                placed.append(key)
    return (_listify(root) if root else None), placed


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    items = {k: _listify(v) for k, v in node.items()}
    if items and all(k.isdigit() for k in items):
        return [items[k] for k in sorted(items, key=int)]
    return items


def _messages(a: Mapping[str, Any], key: str, prefixes: Sequence[str]) -> tuple[list[Any] | None, list[str]]:
    if a.get(key) is not None:
        value = _loads(a[key])
        return (value if isinstance(value, list) else [value]), [key]
    for prefix in prefixes:
        items, keys = _nested(a, prefix)
        if isinstance(items, list):
            return [m.get("message", m) if isinstance(m, dict) else m for m in items], keys
    return None, []


def _message_text(messages: Sequence[Any] | None) -> str | None:
    """The text of output messages: GenAI text parts, OpenInference content(s), OpenLLMetry content."""
    texts: list[str] = []
    for m in messages or ():
        if not isinstance(m, dict):
            continue
        for part in m.get("parts") or m.get("contents") or ():
            part = part.get("message_content", part) if isinstance(part, dict) else part
            if isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("content", part.get("text", ""))))
        if isinstance(m.get("content"), str):
            texts.append(m["content"])
    return "\n".join(t for t in texts if t) or None


def _user_text(messages: Sequence[Any] | None) -> str | None:
    users = (m for m in messages or () if isinstance(m, dict) and m.get("role") == "user")
    return next((_message_text([m]) for m in users), None)


def _first_reason(finish: Any) -> str | None:
    """``gen_ai.response.finish_reasons`` is a list; other conventions record one reason."""
    if isinstance(finish, (list, tuple)):
        finish = finish[0] if finish else None
    return _text(finish) if finish not in (None, "") else None


def _model_call(s: PlainSpan, run_id: str, step: int, log: RequestLog,
                moved: set[str]) -> tuple[dict[str, Any], str | None, str | None]:
    """(llm_call_records row, the model's text output, the first user message) of a model-call span."""
    a = s.attributes
    messages, in_keys = _messages(a, "gen_ai.input.messages", _INPUT_PREFIXES)
    output, out_keys = _messages(a, "gen_ai.output.messages", _OUTPUT_PREFIXES)
    system = _loads(a.get("gen_ai.system_instructions"))
    tools, tool_keys = _loads(a.get("gen_ai.tool.definitions")), ["gen_ai.tool.definitions"]
    for prefix in _TOOLS_PREFIXES if tools is None else ():
        tools, tool_keys = _nested(a, prefix)
        if tools is not None:
            break
    params = {p: a[f"gen_ai.request.{p}"] for p in _GENAI_PARAMS if f"gen_ai.request.{p}" in a}
    invocation = _loads(a.get("llm.invocation_parameters"))
    if isinstance(invocation, dict):
        params.update(invocation)
    model = _first(a, _MODEL_NAME)
    inp, out = _int(_first(a, _INPUT_TOKENS)), _int(_first(a, _OUTPUT_TOKENS))
    read, write = _int(_first(a, _CACHE_READ)), _int(_first(a, _CACHE_WRITE))
    finish = _first(a, ("gen_ai.response.finish_reasons", "llm.finish_reason"))
    if finish is None and output:
        finish = next((m.get("finish_reason") for m in output if isinstance(m, dict)), None)
    row: dict[str, Any] = {
        "run_id": run_id, "step": step, "call_id": s.span_id, "base_call_id": None,
        "provider": _text(_first(a, _PROVIDER)), "model": _text(model),
        "response_model": _text(_first(a, _RESPONSE_MODEL)),
        "started_at": ts(s.start_ns), "ended_at": ts(s.end_ns), "params": to_json(params) if params else None,
        "system_sha": None, "system": None, "tools_sha": None, "tools": None, "messages_keep": None,
        "messages_append": None, "request_sha": None,
        "response": to_json(output) if output is not None else None, "stop_reason": _first_reason(finish),
        "input_tokens": inp, "output_tokens": out, "cache_read_tokens": read, "cache_creation_tokens": write,
        "cost_usd": _cost(model, inp, out, read, write), "retries": 0,
        "error": _text(s.status_message or "error") if s.status_code == "ERROR" else None,
        "span_id": s.span_id,
    }
    if messages is not None:
        # Stored as looptrace stores its own requests: only what each call adds to the previous one.
        request = {**params, "messages": messages}
        request.update({k: v for k, v in (("system", system), ("tools", tools)) if v is not None})
        enc = log.encode(request, s.span_id)
        row.update(base_call_id=enc.base_call_id, system_sha=enc.system_sha, tools_sha=enc.tools_sha,
                   system=to_json(enc.system) if enc.system is not None else None,
                   tools=to_json(enc.tools) if enc.tools is not None else None, messages_keep=enc.keep,
                   messages_append=to_json(enc.append), request_sha=enc.request_sha)
        moved.update(in_keys, tool_keys if tools is not None else (), ["gen_ai.system_instructions"])
    if output is not None:
        moved.update(out_keys)
    return row, _message_text(output) or _plain_output(a), _user_text(messages)


def _plain_output(a: Mapping[str, Any]) -> str | None:
    """OpenInference's ``output.value`` when it is text rather than the raw response as JSON."""
    if a.get("output.value") is None or str(a.get("output.mime_type", "")).endswith("json"):
        return None
    return _text(a["output.value"])


def _cost(model: Any, inp: int | None, out: int | None, read: int | None, write: int | None) -> float | None:
    if not isinstance(model, str) or price_of(model) is None or (inp is None and out is None):
        return None
    fresh = max(0, (inp or 0) - (read or 0) - (write or 0))  # GenAI input tokens include the cache
    return cost_usd(model, input_tokens=fresh, output_tokens=out or 0, cache_read_tokens=read or 0,
                    cache_creation_tokens=write or 0)


def _tool_call(s: PlainSpan, run_id: str, step: int, index: int, moved: set[str]) -> dict[str, Any]:
    """The tool_call_records row of a tool-call span."""
    a = s.attributes
    args_key = next((k for k in _INPUT if a.get(k) is not None), None)
    result_key = next((k for k in _OUTPUT if a.get(k) is not None), None)
    exception = next((e.get("attributes") or {} for e in s.events if e.get("name") == "exception"), {})
    failed = s.status_code == "ERROR" or a.get(c.ERROR_TYPE) is not None
    error_type = a.get(c.ERROR_TYPE) or (exception.get("exception.type") or "tool_error" if failed else None)
    observation = _text(a[result_key]) if result_key else None
    if observation is None and failed:
        observation = _text(s.status_message or exception.get("exception.message"))
    moved.update(k for k in (args_key, result_key) if k)
    return {
        "run_id": run_id, "step": step, "call_index": index, "tool_call_id": _text(_first(a, _TOOL_CALL_ID)),
        "tool": _text(_first(a, _TOOL_NAME) or _tool_name_from(s.name)),
        "args": _json_text(a[args_key]) if args_key else None, "observation": observation,
        "observation_bytes": len(observation.encode("utf-8")) if observation is not None else 0,
        "is_error": failed, "error_type": _text(error_type), "started_at": ts(s.start_ns),
        "ended_at": ts(s.end_ns), "span_id": s.span_id,
    }


def _tool_name_from(span_name: str) -> str:
    """``execute_tool read_file`` (GenAI) or ``read_file.tool`` (OpenLLMetry) -> ``read_file``."""
    name = span_name.removeprefix(f"{c.OP_EXECUTE_TOOL} ")
    for suffix in (".tool", ".task"):
        name = name.removesuffix(suffix)
    return name


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


def _runs(trace: _Trace, trace_id: str) -> tuple[dict[str, _Run], str | None]:
    """Runs by run span id, and the id of the trace-level run (for spans under no run span), if any."""
    calls = trace.calls_by_run()
    keys = [sid for sid, role in trace.roles.items() if role == AGENT or (role == WORKFLOW and sid in calls)]
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
    for run in runs.values():
        if run.span is not None:
            parent = trace.run_of(run.span.parent_span_id, ids, None)
            run.parent_run_id = parent if parent != run.run_id else None
    return runs, trace_run


def _run_rows(run: _Run, source: str, spans: Sequence[PlainSpan],
              moved: dict[str, set[str]]) -> dict[str, list[dict[str, Any]]]:
    log = RequestLog()
    models = sorted((x for x in run.calls if classify(x) == MODEL), key=_order)
    tools = sorted((x for x in run.calls if classify(x) != MODEL), key=_order)
    starts = [m.start_ns or 0 for m in models]
    lead = int(bool(tools) and (not models or (tools[0].start_ns or 0) < starts[0]))
    steps: dict[int, dict[str, Any]] = {}
    llm_rows, tool_rows, first_task = [], [], None
    for i, m in enumerate(models):
        row, thought, task = _model_call(m, run.run_id, i + 1 + lead, log, moved.setdefault(m.span_id, set()))
        llm_rows.append(row)
        first_task = first_task or task
        steps[row["step"]] = _step_row(run.run_id, row["step"], row["started_at"], row["ended_at"], m.span_id,
                                       thought=thought, tokens=(row["input_tokens"], row["output_tokens"]),
                                       cost=row["cost_usd"])
    counts: dict[int, int] = {}
    for t in tools:
        step = bisect.bisect_right(starts, t.start_ns or 0) + lead
        counts[step] = counts.get(step, -1) + 1
        row = _tool_call(t, run.run_id, step, counts[step], moved.setdefault(t.span_id, set()))
        tool_rows.append(row)
        s = steps.setdefault(step, _step_row(run.run_id, step, row["started_at"], None, None))
        if row["ended_at"] is not None and (s["ended_at"] is None or row["ended_at"] > s["ended_at"]):
            s["ended_at"] = row["ended_at"]
    last = steps[max(steps)] if steps else None
    answer = last["thought"] if last and last["step"] not in counts else None
    return {"run_records": [_run_row(run, source, spans, models, first_task, answer)],
            "step_records": [steps[k] for k in sorted(steps)], "llm_call_records": llm_rows,
            "tool_call_records": tool_rows}


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
    named = s.name if s is not None and run.role is not None else None  # an agent's span is named for it
    ended = s is not None and s.end_ns is not None
    failed = ended and s is not None and s.status_code == "ERROR"
    starts = [x.start_ns for x in run.calls if x.start_ns]
    last_seen = max((x.end_ns or x.start_ns or 0 for x in run.calls), default=0)
    return {
        "run_id": run.run_id, "recorded_at": ts(s.end_ns if ended and s is not None else last_seen),
        "parent_run_id": run.parent_run_id, "source": source,
        "agent": _text(_first(a, _AGENT_NAME) or named or service or (s.name if s is not None else None)),
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
    for run in runs.values():
        for table, rows in _run_rows(run, source, new, moved).items():
            out.setdefault(table, []).extend(rows)
    ids = {sid: run.run_id for sid, run in runs.items()}
    run_of = {s.span_id: trace.run_of(s.span_id, ids, trace_run) for s in new}
    out["spans"] = _span_rows(new, run_of, moved)
    return out
