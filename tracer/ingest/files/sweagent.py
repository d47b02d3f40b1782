"""SWE-agent trajectories (``.traj``, ``.traj.gz``), 0.x and 1.x layouts.

Both layouts hold ``trajectory[i] = {action, observation, thought, response}``, the conversation in
``history`` and the totals in ``info.model_stats``. 1.x adds the whole prompt of each step
(``messages``, or ``query`` in some versions), so its context size is measured exactly; for 0.x we
sum the history up to each assistant turn. SWE-agent records no per-step token counts.

The harness's own closing step (action ``exit_cost``, or an empty action with the response "Exit due
to cost limit") is kept as a step without a tool: it is not something the model asked to run.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .trajectory import ImportedStep, Trajectory, estimate_tokens
from .shell import classify_command
from .text import as_dict, as_list, clip, content_text, first_user_text, message_chars, task_text

__all__ = ["AGENT", "parse", "swe_agent_status"]

AGENT = "swe-agent"

# Substring of the exit status -> (run status, what went wrong). Checked in order: "submitted
# (exit_cost)" means the cost cap forced an automatic submission, so the cap is what ended the run.
_EXITS: tuple[tuple[str, str, str], ...] = (
    ("exit_cost", "budget_exceeded", "the run reached its cost limit"),
    ("exit_context", "context_overflow", "the prompt outgrew the model's context window"),
    ("exit_format", "error", "the agent kept producing output that could not be parsed as an action"),
    ("exit_command_timeout", "error", "commands kept timing out"),
    ("early_exit", "error", "the run exited early"),
)
_HARNESS_EXIT = re.compile(r"exit_\w+")


def swe_agent_status(exit_status: Any) -> tuple[str, str | None]:
    """(run status, error text) for SWE-agent's ``info.exit_status``."""
    if exit_status is None or exit_status == "":
        return "incomplete", None
    raw = str(exit_status)
    for marker, status, error in _EXITS:
        if marker in raw:
            return status, f"{error} (exit status {raw!r})"
    if raw == "submitted":
        return "ok", None
    return "error", f"the run ended with exit status {raw!r}"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    n = _number(value)
    return int(n) if n is not None else None


def _replay_config(data: dict[str, Any]) -> dict[str, Any]:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = json.loads(config)
        except ValueError:
            return {}
    return config if isinstance(config, dict) else {}


def _model(data: dict[str, Any], path: Path) -> tuple[str | None, str | None]:
    """(model, the configured name when it was not used).

    A model served from a custom ``api_base`` is often registered under another model's name (the
    SWE-agent-LM-32B runs call it ``gpt-4o``), so there the folder the runs were filed under wins.
    """
    agent = _replay_config(data).get("agent")
    model = agent.get("model") if isinstance(agent, dict) else None
    folder = path.parent.name or None
    if isinstance(model, dict) and isinstance(model.get("name"), str) and model["name"]:
        if not model.get("api_base"):
            return model["name"], None
        return folder or model["name"], model["name"]
    return folder, None


def _history_contexts(history: list[Any], n_steps: int) -> tuple[list[int], bool]:
    """(characters of the history before each assistant turn, whether turns and steps line up).

    When they do not (a history cut short), each entry is the opening messages only, and the caller
    adds each earlier step's response and observation.
    """
    sizes: list[int] = []
    total = 0
    for m in history:
        if isinstance(m, dict) and m.get("role") == "assistant":
            sizes.append(total)
        total += message_chars(m)
    if len(sizes) == n_steps:
        return sizes, True
    return [sizes[0] if sizes else total] * n_steps, False


def _steps(trajectory: list[Any], history: list[Any]) -> list[ImportedStep]:
    contexts, aligned = _history_contexts(history, len(trajectory))
    steps = []
    running = 0  # characters the earlier steps added, when the history does not line up
    for i, raw in enumerate(trajectory):
        s = as_dict(raw, f"trajectory[{i}]")
        action = s.get("action")
        action = action if isinstance(action, str) else "" if action is None else str(action)
        observation = s.get("observation")
        observation = content_text(observation) if observation is not None else None
        response = content_text(s.get("response"))
        thought = s.get("thought")
        thought = content_text(thought) if thought is not None else response
        prompt = s.get("messages", s.get("query"))
        if isinstance(prompt, list):  # 1.x: the prompt itself
            chars = sum(message_chars(m) for m in prompt)
        else:
            chars = contexts[i] + (0 if aligned else running)
        running += len(response) + len(observation or "")
        step = ImportedStep(step=i + 1, thought=thought or None, context_tokens=estimate_tokens(chars))
        text = action.strip()
        if _HARNESS_EXIT.fullmatch(text) or (not text and response.startswith("Exit due to")):
            steps.append(step)
            continue
        call = classify_command(action, observation)
        step.tool, step.args = call.tool, call.args
        step.is_error, step.error_type = call.is_error, call.error_type
        step.observation = observation
        steps.append(step)
    return steps


def parse(data: Any, path: Path) -> list[Trajectory]:
    d = as_dict(data, "the file")
    trajectory = as_list(d.get("trajectory"), "'trajectory'")
    history = d.get("history")
    history = as_list(history, "'history'") if history is not None else []
    info = as_dict(d.get("info"), "'info'")
    stats = as_dict(info.get("model_stats"), "'info.model_stats'")
    status, error = swe_agent_status(info.get("exit_status"))
    model, configured = _model(d, path)
    layout = "1.x" if "replay_config" in d or "swe_agent_version" in info else "0.x"
    attributes: dict[str, Any] = {"format": f"swe-agent {layout}", "exit_status": info.get("exit_status")}
    if "api_calls" in stats:
        attributes["api_calls"] = stats["api_calls"]
    if "swe_agent_version" in info:
        attributes["swe_agent_version"] = info["swe_agent_version"]
    if configured:
        attributes["configured_model"] = configured
    task = task_text(first_user_text(history, skip_demos=True))
    if task is None:
        statement = _replay_config(d).get("problem_statement")
        text = statement.get("text") if isinstance(statement, dict) else None
        task = text if isinstance(text, str) else None
    submission = info.get("submission")
    return [Trajectory(
        source=str(path), agent=AGENT, status=status, steps=_steps(trajectory, history), task=clip(task),
        model=model, answer=submission if isinstance(submission, str) and submission else None, error=error,
        input_tokens=_int(stats.get("tokens_sent")), output_tokens=_int(stats.get("tokens_received")),
        cost_usd=_number(stats.get("instance_cost")), attributes=attributes,
    )]
