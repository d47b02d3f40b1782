"""Inspect AI eval logs: ``.eval`` (a zip: ``header.json`` + one ``samples/*.json`` per sample) and
``.json`` (the same ``EvalLog`` in one document).

One run per sample and epoch, linked to its eval by the shared attribute ``eval_id``. A sample's
``events`` are the record (its ``messages`` are only the final state): each ``model`` event is a
step and an LLM call with its usage; each ``tool`` event is a tool call of the step whose model
output asked for it (matched on the call id), with its result and error. Model events inside scorer
spans belong to grading, not to the agent, and are left out. A ``sample_limit`` event (or the
sample's ``limit``) is the run's end condition and its evidence; scores and sample metadata are kept
as run attributes. Strings Inspect moved to ``attachments`` (``attachment://<hash>``) are resolved.

The run id is the sample's ``uuid`` (namespaced), so the same eval read as ``.eval`` and as
``.json`` is one run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .detect import MAX_BYTES
from .errors import TrajectoryFormatError
from .text import as_dict, as_list, clip, content_text, first_user_text
from .trajectory import ImportedLLMCall, ImportedStep, Trajectory
from .values import iso_time, number, whole
from .zipped import open_zip, read_member

__all__ = ["AGENT", "FORMAT", "LIMIT_STATUS", "parse", "read_eval", "sample_run"]

AGENT = "inspect-ai"
FORMAT = "inspect-ai"
# Inspect's limit types -> run status. Messages count turns; tokens, cost and time are budgets.
LIMIT_STATUS = {
    "message": "max_iters", "token": "budget_exceeded", "cost": "budget_exceeded", "time": "budget_exceeded",
    "working": "budget_exceeded", "context": "context_overflow", "operator": "interrupted", "custom": "error",
}
_SCORER_SPANS = frozenset({"scorer", "scorers"})
_ATTACHMENT = "attachment://"
# Inspect's ToolCallError types -> our error types (others are the tool failing at its job).
_TOOL_ERRORS = {"parsing": "invalid_arguments", "timeout": "command_timeout", "approval": "tool_denied"}


def _resolver(attachments: dict[str, Any]) -> Any:
    def resolve(value: Any) -> Any:
        if isinstance(value, str) and value.startswith(_ATTACHMENT):
            found = attachments.get(value[len(_ATTACHMENT):])
            return found if isinstance(found, str) else value
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: resolve(v) for k, v in value.items()}
        return value
    return resolve


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _scorer_spans(events: list[Any]) -> set[str]:
    spans: set[str] = set()
    for e in events:
        if isinstance(e, dict) and e.get("event") == "span_begin":
            if e.get("type") in _SCORER_SPANS or e.get("parent_id") in spans:
                spans.add(str(e.get("id")))
    return spans


def _message(output: dict[str, Any]) -> dict[str, Any]:
    choices = output.get("choices")
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = first.get("message")
    return message if isinstance(message, dict) else {}


def _model_event(e: dict[str, Any], n: int, steps: list[ImportedStep], calls: list[ImportedLLMCall],
                 pending: dict[str, ImportedStep]) -> None:
    output = as_dict(e.get("output"), "a model event's output")
    usage = as_dict(output.get("usage"), "a model event's usage")
    message = _message(output)
    started, ended = iso_time(e.get("timestamp")), iso_time(e.get("completed"))
    inputs, read = whole(usage.get("input_tokens")), whole(usage.get("input_tokens_cache_read"))
    write, out = whole(usage.get("input_tokens_cache_write")), whole(usage.get("output_tokens"))
    # Inspect's ModelUsage.input_tokens leave the cache out ("the true total input token count is
    # input_tokens + cache_read + cache_write"); older Inspect passed OpenAI's count on, cache inside,
    # and its total_tokens then is input + output alone. The store counts the cache in (docs/schema.md).
    cache = (read or 0) + (write or 0)
    if inputs is not None and cache and whole(usage.get("total_tokens")) != inputs + (out or 0):
        inputs += cache
    context = inputs
    first = as_dict(as_list(output.get("choices") or [{}], "choices")[0], "a choice")
    error = e.get("error")
    calls.append(ImportedLLMCall(
        step=n, model=e.get("model") if isinstance(e.get("model"), str) else None, input_tokens=inputs,
        output_tokens=out, cache_read_tokens=read, cache_creation_tokens=write,
        cost_usd=number(usage.get("total_cost")),
        stop_reason=first.get("stop_reason") if isinstance(first.get("stop_reason"), str) else None,
        error=error if isinstance(error, str) else None, started_at=started, ended_at=ended,
    ))
    thought = content_text(message.get("content")) or None
    tool_calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    if not tool_calls:
        steps.append(ImportedStep(step=n, thought=thought, context_tokens=context, input_tokens=inputs,
                                  output_tokens=whole(usage.get("output_tokens")), started_at=started,
                                  ended_at=ended))
    for k, c in enumerate(tool_calls):
        step = ImportedStep(
            step=n, thought=thought if k == 0 else None, tool=_str(c.get("function")),
            args=c.get("arguments"), call_index=k, context_tokens=context if k == 0 else None,
            input_tokens=inputs if k == 0 else None,
            output_tokens=whole(usage.get("output_tokens")) if k == 0 else None,
            tool_call_id=_str(c.get("id")), started_at=started, ended_at=ended,
        )
        if isinstance(c.get("parse_error"), str):
            step.is_error, step.error_type = True, "invalid_arguments"
        steps.append(step)
        if step.tool_call_id:
            pending[step.tool_call_id] = step


def _tool_event(e: dict[str, Any], n: int, steps: list[ImportedStep],
                pending: dict[str, ImportedStep]) -> None:
    call = pending.pop(str(e.get("id")), None)
    if call is None:  # a tool the solver ran itself, not asked for by a model event
        call = ImportedStep(step=max(n, 1), tool=_str(e.get("function")), args=e.get("arguments"),
                            call_index=sum(1 for s in steps if s.step == max(n, 1)))
        steps.append(call)
    call.observation = content_text(e.get("result")) if e.get("result") is not None else None
    call.started_at, call.ended_at = iso_time(e.get("timestamp")), iso_time(e.get("completed"))
    error = e.get("error")
    if isinstance(error, dict):
        kind, text = str(error.get("type")), content_text(error.get("message"))
        call.is_error = True
        if kind == "parsing" and "not found" in text.lower():
            call.error_type = "tool_not_found"
        else:
            call.error_type = _TOOL_ERRORS.get(kind, "tool_error")
        call.observation = "\n".join(p for p in (call.observation, text) if p) or None


def _events(events: list[Any]) -> tuple[list[ImportedStep], list[ImportedLLMCall], dict[str, Any] | None]:
    skip = _scorer_spans(events)
    steps: list[ImportedStep] = []
    calls: list[ImportedLLMCall] = []
    pending: dict[str, ImportedStep] = {}
    limit: dict[str, Any] | None = None
    n = 0
    for i, raw in enumerate(events):
        e = as_dict(raw, f"events[{i}]")
        if str(e.get("span_id")) in skip:
            continue
        kind = e.get("event")
        if kind == "model":
            n += 1
            _model_event(e, n, steps, calls, pending)
        elif kind == "tool":
            _tool_event(e, n, steps, pending)
        elif kind == "sample_limit":
            limit = {k: e.get(k) for k in ("type", "limit", "message") if e.get(k) is not None}
    return steps, calls, limit


def _status(sample: dict[str, Any], limit: dict[str, Any] | None) -> tuple[str, str | None]:
    error = sample.get("error")
    if isinstance(error, dict):
        return "error", content_text(error.get("message")) or "the sample raised an error"
    if limit is not None:
        kind = str(limit.get("type"))
        return LIMIT_STATUS.get(kind, "error"), str(limit.get("message") or f"{kind} limit reached")
    unfinished = sample.get("completed_at") is None and sample.get("total_time") is None
    if sample.get("completed") is False or unfinished:
        return "incomplete", None
    return "ok", None


def sample_run(sample: dict[str, Any], spec: dict[str, Any], path: Path) -> Trajectory:
    """One sample (one epoch of it) of the eval ``spec`` as a run."""
    resolve = _resolver(as_dict(sample.get("attachments"), "'attachments'"))
    sample = {k: resolve(v) for k, v in sample.items() if k != "attachments"}
    steps, calls, limit = _events(as_list(sample.get("events") or [], "'events'"))
    sample_limit = sample.get("limit")
    if limit is None and isinstance(sample_limit, dict):
        limit = {"type": sample_limit.get("type"), "limit": sample_limit.get("limit"),
                 "message": sample_limit.get("reason") or sample_limit.get("message")}
    status, error = _status(sample, limit)
    raw_input = sample.get("input")
    task = raw_input if isinstance(raw_input, str) else (
        first_user_text(raw_input) if isinstance(raw_input, list) else None)
    output = as_dict(sample.get("output"), "'output'")
    scores = {name: s.get("value") for name, s in as_dict(sample.get("scores"), "'scores'").items()
              if isinstance(s, dict)}
    attributes: dict[str, Any] = {
        "format": FORMAT, "eval_id": spec.get("eval_id"), "eval_run_id": spec.get("run_id"),
        "task": spec.get("task"),
        "sample_id": sample.get("id"), "epoch": sample.get("epoch"),
    }
    for name, value in (("scores", scores), ("metadata", sample.get("metadata")), ("limit", limit),
                        ("target", sample.get("target"))):
        if value:
            attributes[name] = value
    uuid = sample.get("uuid")
    fallback = f"{spec.get('eval_id')}/{sample.get('id')}/{sample.get('epoch')}"
    usage = [c for c in calls if c.input_tokens is not None or c.output_tokens is not None]
    model = spec.get("model")
    return Trajectory(
        source=str(path), agent=AGENT, status=status, steps=steps, task=clip(task),
        model=model if isinstance(model, str) else None,
        answer=output.get("completion") or None if isinstance(output.get("completion"), str) else None,
        error=error, started_at=iso_time(sample.get("started_at")),
        ended_at=iso_time(sample.get("completed_at")),
        input_tokens=sum(c.input_tokens or 0 for c in usage) if usage else None,
        output_tokens=sum(c.output_tokens or 0 for c in usage) if usage else None,
        attributes={k: v for k, v in attributes.items() if v is not None}, llm_calls=calls,
        key=uuid if isinstance(uuid, str) else fallback,
        origin="inspect-ai" if isinstance(uuid, str) else "",
    )


def parse(data: Any, path: Path) -> list[Trajectory]:
    """An ``EvalLog`` as one JSON document (``.json`` logs)."""
    d = as_dict(data, "the file")
    spec = as_dict(d.get("eval"), "'eval'")
    samples = d.get("samples")
    if samples is None:  # a log written with no samples (an eval that failed before any ran)
        raise TrajectoryFormatError(f"an Inspect log with no samples (eval status {d.get('status')!r})")
    samples = as_list(samples, "'samples'")
    return [sample_run(as_dict(s, f"samples[{i}]"), spec, path) for i, s in enumerate(samples)]


def _member_json(archive: Any, name: str) -> Any:
    raw = read_member(archive, name, MAX_BYTES)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise TrajectoryFormatError(f"{name} in the archive is not valid JSON ({exc})") from exc


def read_eval(path: Path) -> list[Trajectory]:
    """An ``.eval`` archive, sample by sample (each member read on its own)."""
    with open_zip(path) as archive:
        names = set(archive.namelist())
        header = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
        if header is None:
            raise TrajectoryFormatError("a zip archive that is not an Inspect log (no header.json)")
        spec = as_dict(as_dict(_member_json(archive, header), header).get("eval"), "'eval'")
        samples = sorted(n for n in names if n.startswith("samples/") and n.endswith(".json"))
        if not samples:
            raise TrajectoryFormatError("an Inspect log with no samples")
        return [sample_run(as_dict(_member_json(archive, n), n), spec, path) for n in samples]
