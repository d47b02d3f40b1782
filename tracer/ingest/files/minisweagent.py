"""mini-swe-agent trajectories (``.traj.json``): a plain message list plus ``info``.

Each assistant message is a step; its action is the single fenced ``bash`` block (mini-swe-agent's
own rule), and the next user message is what came back: the command's ``<returncode>``/``<output>``,
a timeout notice, or format-error feedback when the message held no block or several. The last
case is a step with no tool, ``error_type="unparseable"``. Per-step token counts come from the
provider's ``usage`` kept in ``extra.response`` when present.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .trajectory import ImportedStep, Trajectory, estimate_tokens
from .shell import classify_command
from .text import as_dict, as_list, clip, content_text, first_user_text, message_chars, task_text

__all__ = ["AGENT", "bash_blocks", "mini_status", "parse"]

AGENT = "mini-swe-agent"

_ACTION = re.compile(r"```bash\s*\n(.*?)\n```", re.DOTALL)  # mini-swe-agent's default action_regex
_TIMEOUT = re.compile(r"\AThe last command <command>.*?</command> timed out", re.DOTALL)
_STATUS = {
    "Submitted": ("ok", None),
    "LimitsExceeded": ("max_iters", "the run reached its step or cost limit"),
    "FormatError": ("error", "the agent kept producing output without exactly one bash block"),
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


def _time(seconds: int | None) -> datetime | None:
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None


def parse(data: Any, path: Path) -> list[Trajectory]:
    d = as_dict(data, "the file")
    messages = as_list(d.get("messages"), "'messages'")
    info = as_dict(d.get("info"), "'info'")
    stats = as_dict(info.get("model_stats"), "'info.model_stats'")
    config = as_dict(info.get("config"), "'info.config'")
    model_config = as_dict(config.get("model"), "'info.config.model'")
    status, error = mini_status(info.get("exit_status"))
    steps, created = _steps(messages)
    task = task_text(first_user_text(messages))
    attributes: dict[str, Any] = {"format": "mini-swe-agent", "exit_status": info.get("exit_status")}
    if "api_calls" in stats:
        attributes["api_calls"] = stats["api_calls"]
    if "mini_version" in info:
        attributes["mini_version"] = info["mini_version"]
    if isinstance(d.get("instance_id"), str):
        attributes["instance_id"] = d["instance_id"]
    cost = stats.get("instance_cost")
    model = model_config.get("model_name")
    submission = info.get("submission")
    return [Trajectory(
        source=str(path), agent=AGENT, status=status, steps=steps, task=clip(task),
        model=model if isinstance(model, str) and model else None,
        answer=submission if isinstance(submission, str) and submission else None, error=error,
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
        started_at=_time(min(created, default=None)), ended_at=_time(max(created, default=None)),
        attributes=attributes,
    )]
