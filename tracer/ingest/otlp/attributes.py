"""Reading one span of another instrumentation: its role and what each convention's attributes say.

``classify`` reduces a span of the OTel GenAI conventions, OpenInference or OpenLLMetry to a role
(agent, workflow, model call, tool call); ``model_call`` and ``tool_call`` read a model or tool span into
looptrace's typed rows. Pure functions; ``conventions.py`` assembles whole traces from them. Reading a
value into a column's type is ``values.py``; reading a span's message lists is ``message_lists.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from ...records import conventions as c
from ...records.pricing import counted_cost
from ...records.spans import PlainSpan, ts
from ...records.requests import RequestLog
from ...records.text import to_json
from .frameworks import ARGUMENT_WRAPPERS, FINAL_ANSWER_SPANS, RESULT_WRAPPERS, unwrap
from .message_lists import (
    _INPUT_PREFIXES, _TOOLS_PREFIXES, _flattened, _message_text, _messages, _nested, _output_messages, _raw_io,
    _user_text,
)
from .values import _UNPARSED, _first, _int, _json_text, _loads, _text

AGENT, WORKFLOW, MODEL, TOOL = "agent", "workflow", "model", "tool"

_GENAI_OPS: dict[str, str | None] = {
    c.OP_INVOKE_AGENT: AGENT, c.OP_CHAT: MODEL, "text_completion": MODEL, "generate_content": MODEL,
    c.OP_EXECUTE_TOOL: TOOL, "call_llm": MODEL,  # any-agent's name for a model call
    # The newest agent spans (docs/frameworks.md, "GenAI conventions by version"): a workflow is a run
    # above its agents' runs; creating an agent and a planning phase are no call of their own (a plan's
    # model calls are its agent's steps), kept in ``spans``.
    "invoke_workflow": WORKFLOW, "create_agent": None, "plan": None,
}
INVOKE_WORKFLOW = "invoke_workflow"
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
_CACHE_WRITE = ("gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.cache_creation.input_tokens",
               "gen_ai.usage.cache_write_input_tokens", "gen_ai.usage.cache_creation_input_tokens",
               "llm.token_count.prompt_details.cache_write")
_AGENT_NAME = ("gen_ai.agent.name", "gen_ai.workflow.name", "agent.name", "traceloop.entity.name",
               "traceloop.workflow.name")
_TOOL_NAME = ("gen_ai.tool.name", "tool.name", "traceloop.entity.name")
_TOOL_CALL_ID = ("gen_ai.tool.call.id", "tool_call.id", "tool.id")
# A tool span's arguments and result. ``gen_ai.tool.args`` and ``gen_ai.output`` are the spelling of
# libraries that wrote the GenAI conventions before these names existed (any-agent); the conventions'
# own names come first, so they win when a span carries both.
_INPUT = ("gen_ai.tool.call.arguments", "gen_ai.tool.args", "input.value", "traceloop.entity.input")
_OUTPUT = ("gen_ai.tool.call.result", "gen_ai.output", "output.value", "traceloop.entity.output")
_TOOL_PARAMETERS = ("tool.parameters",)  # OpenInference: the tool's parameters as a JSON object, in order
# A model call's cost as the trace recorded it, in dollars (any-agent): input and output parts.
_COST_PARTS = ("gen_ai.usage.input_cost", "gen_ai.usage.output_cost")
_GENAI_PARAMS = ("max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "frequency_penalty",
                 "presence_penalty", "seed", "choice.count")
_GENAI_PARAM_KEYS = tuple((p, f"gen_ai.request.{p}") for p in _GENAI_PARAMS)


def is_native(span: PlainSpan) -> bool:
    """Traced by looptrace itself: ``tracer.records`` maps it."""
    return isinstance(span.attributes.get(c.RUN_ID), str)


def classify(span: PlainSpan) -> str | None:
    """``AGENT``, ``WORKFLOW``, ``MODEL``, ``TOOL``, or None for a span of no known convention."""
    a = span.attributes
    op = a.get(c.GEN_AI_OPERATION)
    if isinstance(op, str) and op in _GENAI_OPS:  # untrusted: any attribute may hold any type
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
    output, out_keys = _output_messages(a)
    system = _loads(a.get("gen_ai.system_instructions"))
    tools, tool_keys = _loads(a.get("gen_ai.tool.definitions")), ["gen_ai.tool.definitions"]
    for prefix in _TOOLS_PREFIXES if tools is None and _flattened(a, _TOOLS_PREFIXES) else ():
        tools, tool_keys = _nested(a, prefix)
        if tools is not None:
            break
    raw_messages, raw_output, raw_tools = _raw_io(a)
    if messages is None and raw_messages is not None:
        messages, in_keys = raw_messages, ["input.value"]
        tools, tool_keys = (raw_tools, []) if tools is None else (tools, tool_keys)
    if output is None and raw_output is not None:
        output, out_keys = raw_output, ["output.value"]
    params = {p: a[key] for p, key in _GENAI_PARAM_KEYS if key in a}
    invocation = _loads(a.get("llm.invocation_parameters"))
    if isinstance(invocation, dict):
        params.update(invocation)
    model = _first(a, _MODEL_NAME)
    inp, out = _int(_first(a, _INPUT_TOKENS)), _int(_first(a, _OUTPUT_TOKENS))
    read, write = _int(_first(a, _CACHE_READ)), _int(_first(a, _CACHE_WRITE))
    finish = _first(a, ("gen_ai.response.finish_reasons", "llm.finish_reason"))
    if finish is None and output:
        finish = next((m.get("finish_reason") for m in output if isinstance(m, dict)), None)
    # A recorded cost is the source's own; else the tokens priced (GenAI input tokens include the cache).
    recorded = _recorded_cost(a)
    row: dict[str, Any] = {
        "run_id": run_id, "step": step, "call_id": s.span_id, "base_call_id": None,
        "provider": _text(_first(a, _PROVIDER)), "model": _text(model),
        "response_model": _text(_first(a, _RESPONSE_MODEL)),
        "started_at": ts(s.start_ns), "ended_at": ts(s.end_ns), "params": to_json(params) if params else None,
        "system_sha": None, "system": None, "tools_sha": None, "tools": None, "messages_keep": None,
        "messages_drop": None,
        "messages_append": None, "request_sha": None,
        "response": to_json(output) if output is not None else None, "stop_reason": _first_reason(finish),
        "input_tokens": inp, "output_tokens": out, "cache_read_tokens": read, "cache_creation_tokens": write,
        "cost_usd": recorded if recorded is not None else counted_cost(model, inp, out, read, write),
        "retries": 0,
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
                   messages_drop=enc.drop or None, messages_append=to_json(enc.append), request_sha=enc.request_sha)
        moved.update(in_keys, tool_keys if tools is not None else (), ["gen_ai.system_instructions"])
    if output is not None:
        moved.update(out_keys)
    return row, _message_text(output) or _plain_output(a), _user_text(messages)


def _plain_output(a: Mapping[str, Any]) -> str | None:
    """OpenInference's ``output.value`` when it is text rather than the raw response as JSON."""
    if a.get("output.value") is None or str(a.get("output.mime_type", "")).endswith("json"):
        return None
    return _text(a["output.value"])


def _recorded_cost(a: Mapping[str, Any]) -> float | None:
    """The call's cost as the trace recorded it (``_COST_PARTS``), or None: a recorded figure is the
    source's own, so it is kept rather than estimated again from the price table."""
    parts = [a.get(k) for k in _COST_PARTS]
    numbers = [float(p) for p in parts if isinstance(p, (int, float)) and not isinstance(p, bool) and p == p]
    return sum(numbers) if numbers else None


def _tool_call(s: PlainSpan, run_id: str, step: int, index: int, moved: set[str]) -> dict[str, Any]:
    """The tool_call_records row of a tool-call span."""
    a = s.attributes
    args_key = next((k for k in _INPUT if a.get(k) is not None), None)
    result_key = next((k for k in _OUTPUT if a.get(k) is not None), None)
    exception = _exception(s)
    failed = s.status_code == "ERROR" or a.get(c.ERROR_TYPE) is not None
    error_type = a.get(c.ERROR_TYPE) or (exception.get("exception.type") or "tool_error" if failed else None)
    observation = _text(_unwrapped(a[result_key], RESULT_WRAPPERS)) if result_key else None
    if observation is None and failed:
        observation = _error_text(s)
    moved.update(k for k in (args_key, result_key) if k)
    args = parsed = None
    if args_key:  # parsed once, for the wrapper test and the JSON column
        raw, parsed = a[args_key], _loads(a[args_key])
        inner = unwrap(parsed, ARGUMENT_WRAPPERS, _parameter_names(a))
        args = raw if inner is parsed else inner
        parsed = parsed if args is raw else _UNPARSED
    return {
        "run_id": run_id, "step": step, "call_index": index, "tool_call_id": _text(_first(a, _TOOL_CALL_ID)),
        "tool": _text(_span_tool_name(s)),
        "args": _json_text(args, parsed) if args_key else None,
        "observation": observation,
        "observation_bytes": len(observation.encode("utf-8")) if observation is not None else 0,
        "is_error": failed, "error_type": _text(error_type), "started_at": ts(s.start_ns),
        "ended_at": ts(s.end_ns), "span_id": s.span_id,
    }


def _unwrapped(raw: Any, wrappers: Any, names: Sequence[str] = ()) -> Any:
    """The value inside a framework's wrapper (frameworks.py), or ``raw`` as it came when there is none."""
    value = _loads(raw)
    inner = unwrap(value, wrappers, names)
    return raw if inner is value else inner


def _parameter_names(a: Mapping[str, Any]) -> list[str]:
    """The tool's parameter names in order, where the span records them: arguments passed by position
    are stored under them."""
    parameters = _loads(_first(a, _TOOL_PARAMETERS))
    return [str(k) for k in parameters] if isinstance(parameters, dict) else []


def _exception(s: PlainSpan) -> Mapping[str, Any]:
    """The attributes of the span's first exception event (empty when it has none)."""
    return next((e.get("attributes") or {} for e in s.events if e.get("name") == "exception"), {})


def _error_text(s: PlainSpan) -> str | None:
    """What a failed span says went wrong: its status message, else its exception's type and message.
    A failed tool call's observation: the same tool failing with the same error reads the same."""
    if s.status_message:
        return _text(s.status_message)
    exception = _exception(s)
    kind, message = exception.get("exception.type"), exception.get("exception.message")
    if message is None:
        return _text(kind)
    return _text(f"{kind}: {message}" if kind else message)


def _span_tool_name(s: PlainSpan) -> str:
    """A tool span's tool: its recorded name, a final-answer tool known by its span's name, else the
    span's name (``execute_tool NAME``, ``NAME.tool``)."""
    return str(_first(s.attributes, _TOOL_NAME) or FINAL_ANSWER_SPANS.get(s.name) or _tool_name_from(s.name))


def _tool_name_from(span_name: str) -> str:
    """``execute_tool read_file`` (GenAI) or ``read_file.tool`` (OpenLLMetry) -> ``read_file``."""
    name = span_name.removeprefix(f"{c.OP_EXECUTE_TOOL} ")
    for suffix in (".tool", ".task"):
        name = name.removesuffix(suffix)
    return name
