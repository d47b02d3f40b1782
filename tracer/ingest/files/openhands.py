"""OpenHands event streams: a trajectory export (a JSON list of events), an evaluation output
(``{"instance_id", "history": [...], "error", "metrics"}``, one per line of ``output.jsonl``), or the
older history of ``[action, observation]`` pairs.

An event is an action (``action``, ``args``) or an observation (``observation``, ``content``,
``extras``, ``cause`` = the id of the action it answers), each with a ``source``. Agent actions from
one model response (the same ``tool_call_metadata.model_response.id``) are one step, each a tool
call named by ``tool_call_metadata.function_name`` (else by the action); an agent ``message`` is a
reply step with no tool. The run ends with the last ``agent_state_changed`` observation: ``finished``
(or a ``finish`` action) is ``ok``; ``error``/``stopped`` is ``max_iters``, ``budget_exceeded`` or
``stagnated`` when the reason (state change, last error observation, or the output's ``error``) says
so, else ``error``. Usage comes from each response's ``usage`` and the last ``llm_metrics``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .text import as_dict, as_list, clip, content_text
from .trajectory import ImportedStep, Trajectory
from .values import iso_time, number, whole

__all__ = ["AGENT", "end_status", "events_of", "is_event_stream", "parse"]

AGENT = "openhands"
_NOT_STEPS = frozenset({"change_agent_state", "system", "recall", "null"})
_NOISE_ARGS = frozenset({"thought", "confirmation_state", "security_risk", "is_confirmed", "hidden",
                         "wait_for_response", "image_urls", "file_urls"})
# Words in an error reason -> the run status they mean (checked in order).
_REASONS = (("maximum iteration", "max_iters"), ("max_iterations", "max_iters"),
            ("budget", "budget_exceeded"), ("stuck", "stagnated"), ("loop", "stagnated"),
            ("context window", "context_overflow"))


def _is_event(value: Any) -> bool:
    return isinstance(value, dict) and "source" in value and ("action" in value or "observation" in value)


def events_of(data: Any) -> list[Any] | None:
    """The events a document holds (pairs flattened), or None when it is not an event stream."""
    history = data.get("history") if isinstance(data, dict) else data
    if not isinstance(history, list) or not history:
        return None
    head = history[:5]
    if all(_is_event(e) for e in head):
        return history
    if all(isinstance(p, list) and len(p) == 2 and all(isinstance(x, dict) for x in p) for p in head) and any(
            _is_event(x) for p in head for x in p):
        return [x for p in history for x in (p if isinstance(p, list) else [p]) if x]  # [action, observation]
    return None


def is_event_stream(data: Any) -> bool:
    return events_of(data) is not None


def end_status(state: str | None, reason: str, finished: bool) -> tuple[str, str | None]:
    """(run status, error text) from the last agent state and the reason given for it."""
    low = reason.lower()
    if state in ("finished", "awaiting_user_input") or (state is None and finished):
        return "ok", None
    if state in ("error", "stopped", "rejected") or reason:
        for word, status in _REASONS:
            if word in low:
                return status, reason
        if state == "stopped" and not reason:
            return "interrupted", f"agent state {state!r}"
        return "error", reason or f"agent state {state!r}"
    return "incomplete", None


def _response_id(e: dict[str, Any]) -> str | None:
    meta = e.get("tool_call_metadata")
    response = meta.get("model_response") if isinstance(meta, dict) else None
    rid = response.get("id") if isinstance(response, dict) else None
    return str(rid) if rid is not None else None


def _usage(e: dict[str, Any]) -> tuple[int | None, int | None]:
    meta = as_dict(e.get("tool_call_metadata"), "tool_call_metadata")
    response = meta.get("model_response")
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None, None
    return whole(usage.get("prompt_tokens")), whole(usage.get("completion_tokens"))


def _call(e: dict[str, Any], n: int, k: int) -> ImportedStep:
    args = as_dict(e.get("args"), "an action's args")
    meta = as_dict(e.get("tool_call_metadata"), "tool_call_metadata")
    name = meta.get("function_name") if isinstance(meta.get("function_name"), str) else e.get("action")
    thought = args.get("thought") if isinstance(args.get("thought"), str) else None
    when = iso_time(e.get("timestamp"))
    if e.get("action") == "message":
        return ImportedStep(step=n, thought=content_text(args.get("content")) or thought, call_index=k,
                            started_at=when, ended_at=when)
    return ImportedStep(
        step=n, thought=thought if k == 0 else None, tool=str(name), call_index=k, started_at=when,
        ended_at=when,
        args={key: v for key, v in args.items() if key not in _NOISE_ARGS},
        tool_call_id=meta.get("tool_call_id") if isinstance(meta.get("tool_call_id"), str) else None,
    )


def _observe(call: ImportedStep, e: dict[str, Any]) -> None:
    call.observation = content_text(e.get("content"))
    call.ended_at = iso_time(e.get("timestamp")) or call.ended_at
    extras = as_dict(e.get("extras"), "an observation's extras")
    metadata = extras.get("metadata")
    code = metadata.get("exit_code") if isinstance(metadata, dict) else extras.get("exit_code")
    if e.get("observation") == "error":
        call.is_error, call.error_type = True, "tool_error"
    elif isinstance(code, int) and code not in (0, -1):
        call.is_error, call.error_type = True, "command_error"


def _run(data: Any, events: list[Any], path: Path, key: str) -> Trajectory:
    meta = data if isinstance(data, dict) else {}
    steps: list[ImportedStep] = []
    by_id: dict[Any, ImportedStep] = {}
    state, reason, finished, task, response, last_error = None, "", False, None, object(), ""
    cost = None
    for i, raw in enumerate(events):
        e = as_dict(raw, f"event {i}")
        metrics = e.get("llm_metrics")
        if isinstance(metrics, dict) and number(metrics.get("accumulated_cost")) is not None:
            cost = number(metrics.get("accumulated_cost"))
        if "observation" in e:
            extras = as_dict(e.get("extras"), "an observation's extras")
            if e.get("observation") == "agent_state_changed":
                state = extras.get("agent_state") if isinstance(extras.get("agent_state"), str) else state
                reason = content_text(extras.get("reason")) or (last_error if state == "error" else "")
            elif e.get("observation") == "error":
                last_error = content_text(e.get("content"))
            if e.get("cause") in by_id:
                _observe(by_id.pop(e.get("cause")), e)
            continue
        action = e.get("action")
        if e.get("source") == "user" and action == "message" and task is None:
            task = content_text(as_dict(e.get("args"), "args").get("content"))
        if e.get("source") != "agent" or action in _NOT_STEPS:
            continue
        finished = finished or action == "finish"
        rid = _response_id(e)
        if rid is None or rid != response or not steps:
            response = rid
            n = (steps[-1].step + 1) if steps else 1
            call = _call(e, n, 0)
            call.context_tokens, call.output_tokens = _usage(e)
            call.input_tokens = call.context_tokens
        else:
            call = _call(e, steps[-1].step, sum(1 for s in steps if s.step == steps[-1].step))
        steps.append(call)
        if e.get("id") is not None:
            by_id[e.get("id")] = call
    error_text = content_text(meta.get("error")) if meta.get("error") else ""
    status, error = end_status(state, reason or error_text, finished)
    times = [t for t in (iso_time(as_dict(e, "event").get("timestamp")) for e in events) if t is not None]
    instruction = meta.get("instruction")
    metrics = as_dict(meta.get("metrics"), "'metrics'")
    model = as_dict(as_dict(meta.get("metadata"), "'metadata'").get("llm_config"), "llm_config").get("model")
    attributes: dict[str, Any] = {"format": "openhands"}
    for name in ("instance_id",):
        if meta.get(name) is not None:
            attributes[name] = meta[name]
    if state is not None:
        attributes["agent_state"] = state
    return Trajectory(
        source=str(path), agent=AGENT, status=status, steps=steps, key=key, error=error,
        task=clip(instruction if isinstance(instruction, str) else task),
        model=model if isinstance(model, str) else None,
        cost_usd=number(metrics.get("accumulated_cost")) if metrics else cost,
        started_at=min(times, default=None), ended_at=max(times, default=None), attributes=attributes,
    )


def parse(data: Any, path: Path) -> list[Trajectory]:
    events = events_of(data)
    return [_run(data, as_list(events, "the events"), path, "")]
