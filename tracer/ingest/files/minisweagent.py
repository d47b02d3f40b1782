"""mini-swe-agent trajectories (``.traj.json``): a plain message list plus ``info``.

Each assistant message is a step. In 1.x its action is the single fenced ``bash`` block
(mini-swe-agent's own rule), and the next user message is what came back: the command's
``<returncode>``/``<output>``, a timeout notice, or format-error feedback when the message held no
block or several. The last case is a step with no tool, ``error_type="unparseable"``. 2.x (still
labelled ``mini-swe-agent-1.1``) calls a ``bash`` tool instead: each of the message's ``tool_calls``
is a call of the step, answered by a ``tool`` message with the same ``tool_call_id``; a message
with no call is answered by format-error feedback and is ``unparseable`` as in 1.x, and the run ends
with an ``exit`` message. Either way the tool is the command's first word (``shell.py``), so both
versions' runs compare. Per-step token counts come from the provider's ``usage`` kept in
``extra.response`` when present; times from ``extra.timestamp`` (2.x) or the response's ``created``.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from .trajectory import ImportedStep, Trajectory, estimate_tokens
from .openai_chat import parse_arguments
from .shell import classify_command
from .text import as_dict, as_list, clip, content_text, first_user_text, message_chars, task_text
from .values import epoch_time, number

__all__ = ["AGENT", "bash_blocks", "mini_status", "parse"]

AGENT = "mini-swe-agent"

_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)  # mini-swe-agent's default action_regex
_TIMEOUT = re.compile(r"\AThe last command <command>.*?</command> timed out", re.DOTALL)
_STATUS = {
    "Submitted": ("ok", None),
    "LimitsExceeded": ("max_iters", "the run reached its step or cost limit"),
    "TimeExceeded": ("budget_exceeded", "the run reached its wall-time limit"),
    "FormatError": ("error", "the agent kept producing output without exactly one bash block"),
    "RepeatedFormatError": ("error", "the agent kept producing output without a valid tool call"),
}


def mini_status(exit_status: Any) -> tuple[str, str | None]:
    """(run status, error text) for mini-swe-agent's ``info.exit_status``."""
    if exit_status is None or exit_status == "":
        return "incomplete", None
    raw = str(exit_status)
    status, error = _STATUS.get(raw, ("error", "the run ended with exit status {raw!r}"))
    return status, error.format(raw=raw) if error else None


def bash_blocks(text: str) -> list[str]:
    return _ACTION.findall(text)


def _usage(message: dict[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(prompt tokens, completion tokens, created) from the raw provider response, if kept."""
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return None, None, None
    usage = response.get("usage")
    usage = usage if isinstance(usage, dict) else {}

    def whole(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

    prompt, completion = whole(usage.get("prompt_tokens")), whole(usage.get("completion_tokens"))
    return prompt, completion, whole(response.get("created"))


def _steps(messages: list[Any]) -> tuple[list[ImportedStep], list[int]]:
    steps: list[ImportedStep] = []
    created: list[int] = []
    chars = 0
    for i, raw in enumerate(messages):
        m = as_dict(raw, f"messages[{i}]")
        if m.get("role") != "assistant":
            chars += message_chars(m)
            continue
        text = content_text(m.get("content"))
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answered = isinstance(nxt, dict) and nxt.get("role") != "assistant"
        observation = content_text(nxt.get("content")) if answered and isinstance(nxt, dict) else None
        prompt_tokens, completion_tokens, when = _usage(m)
        if when is not None:
            created.append(when)
        step = ImportedStep(
            step=len(steps) + 1, thought=text or None, observation=observation,
            context_tokens=prompt_tokens if prompt_tokens is not None else estimate_tokens(chars),
            input_tokens=prompt_tokens, output_tokens=completion_tokens,
        )
        chars += message_chars(m)
        blocks = bash_blocks(text)
        if len(blocks) != 1:
            step.is_error, step.error_type = True, "unparseable"
        else:
            call = classify_command(blocks[0], observation)
            step.tool, step.args, step.is_error, step.error_type = (
                call.tool, call.args, call.is_error, call.error_type)
            if call.error_type is None and observation and _TIMEOUT.match(observation):
                step.is_error, step.error_type = True, "command_timeout"
            step.thought = _ACTION.sub("", text).strip() or None
        steps.append(step)
    return steps, created


def _is_toolcalling(messages: list[Any]) -> bool:
    return any(isinstance(m, dict) and (m.get("role") in ("tool", "exit") or bool(m.get("tool_calls")))
               for m in messages)


def _extra(m: Any) -> dict[str, Any]:
    extra = m.get("extra") if isinstance(m, dict) else None
    return extra if isinstance(extra, dict) else {}


def _tool_step(n: int, k: int, call: Any, thought: str | None, results: dict[str, dict[str, Any]],
               started: datetime | None) -> ImportedStep:
    call = call if isinstance(call, dict) else {}
    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
    cid = call.get("id") if isinstance(call.get("id"), str) else None
    result = results.get(cid or "")
    observation = content_text(result.get("content")) if result is not None else None
    args, bad = parse_arguments(fn.get("arguments"))
    step = ImportedStep(step=n, thought=thought if k == 0 else None, call_index=k, tool_call_id=cid,
                        observation=observation, started_at=started,
                        ended_at=epoch_time(_extra(result).get("timestamp")) if result else None)
    command = args.get("command") if isinstance(args, dict) else None
    if fn.get("name") != "bash" or bad or not isinstance(command, str):
        name = fn.get("name")
        step.tool, step.args, step.is_error = name if isinstance(name, str) else None, args, True
        step.error_type = bad or ("tool_not_found" if fn.get("name") != "bash" else "invalid_arguments")
        return step
    shell = classify_command(command, observation)
    step.tool, step.args = shell.tool, shell.args
    step.is_error, step.error_type = shell.is_error, shell.error_type
    return step


def _tool_steps(messages: list[Any]) -> tuple[list[ImportedStep], list[datetime]]:
    """2.x: assistant messages with ``tool_calls``, answered by ``tool`` messages."""
    results = {m["tool_call_id"]: m for m in messages
               if isinstance(m, dict) and m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)}
    steps: list[ImportedStep] = []
    times: list[datetime] = []
    chars = 0
    n = 0
    for i, raw in enumerate(messages):
        m = as_dict(raw, f"messages[{i}]")
        when = epoch_time(_extra(m).get("timestamp"))
        if when is not None:
            times.append(when)
        if m.get("role") != "assistant":
            chars += message_chars(m)
            continue
        n += 1
        thought = content_text(m.get("content")) or None
        prompt_tokens, completion_tokens, created = _usage(m)
        context = prompt_tokens if prompt_tokens is not None else estimate_tokens(chars)
        calls = m.get("tool_calls") if isinstance(m.get("tool_calls"), list) else []
        if not calls:  # answered by format-error feedback
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            feedback = nxt if isinstance(nxt, dict) and nxt.get("role") == "user" else None
            steps.append(ImportedStep(
                step=n, thought=thought, is_error=True, error_type="unparseable", started_at=when,
                ended_at=when,
                observation=content_text(feedback.get("content")) if feedback is not None else None))
        for k, call in enumerate(calls):
            steps.append(_tool_step(n, k, call, thought, results, when))
        first = next(s for s in steps if s.step == n)
        first.context_tokens = context
        first.input_tokens, first.output_tokens = prompt_tokens, completion_tokens
        chars += message_chars(m)
    return steps, times


def parse(data: Any, path: Path) -> list[Trajectory]:
    d = as_dict(data, "the file")
    messages = as_list(d.get("messages"), "'messages'")
    info = as_dict(d.get("info"), "'info'")
    stats = as_dict(info.get("model_stats"), "'info.model_stats'")
    config = as_dict(info.get("config"), "'info.config'")
    model_config = as_dict(config.get("model"), "'info.config.model'")
    exits = [m for m in messages if isinstance(m, dict) and m.get("role") == "exit"]
    exit_message = exits[-1] if exits else None
    exit_status = info.get("exit_status") or _extra(exit_message).get("exit_status")
    status, error = mini_status(exit_status)
    if _is_toolcalling(messages):
        steps, times = _tool_steps(messages)
        started, ended = min(times, default=None), max(times, default=None)
        version = "2.x"
    else:
        steps, created = _steps(messages)
        started, ended = epoch_time(min(created, default=None)), epoch_time(max(created, default=None))
        version = "1.x"
    task = task_text(first_user_text(messages))
    attributes: dict[str, Any] = {"format": f"mini-swe-agent {version}", "exit_status": exit_status}
    if "api_calls" in stats:
        attributes["api_calls"] = stats["api_calls"]
    if "mini_version" in info:
        attributes["mini_version"] = info["mini_version"]
    if isinstance(d.get("instance_id"), str):
        attributes["instance_id"] = d["instance_id"]
    cost = number(stats.get("instance_cost"))
    calls = stats.get("api_calls")
    if cost == 0 and (steps or (isinstance(calls, int) and calls > 0)):
        # mini-swe-agent refuses a model call it cannot price (cost <= 0 raises), unless told to go on
        # (``cost_tracking: ignore_errors``, for models litellm has no price of): it then counts 0.0.
        # A run that called its model and cost 0 has an unknown cost; the source's 0 stays in attributes.
        attributes["instance_cost"] = cost
        cost = None
    model = model_config.get("model_name")
    submission = info.get("submission") or _extra(exit_message).get("submission")
    return [Trajectory(
        source=str(path), agent=AGENT, status=status, steps=steps, task=clip(task),
        model=model if isinstance(model, str) and model else None,
        answer=submission if isinstance(submission, str) and submission else None, error=error,
        cost_usd=cost, started_at=started, ended_at=ended,
        attributes=attributes,
    )]
