"""OpenAI-style tool-calling transcripts: tau-bench episodes (``traj``), plain ``messages`` logs,
and bare message lists (a JSON list of messages, with no wrapper object, is one run).

Each assistant message is a step; its ``tool_calls`` are the step's calls (``call_index`` 0..n, the
thought on the first), answered by ``tool`` messages matched on ``tool_call_id``, else on name and
order. An assistant message without calls is a reply to the user: a step with no tool.

tau-bench ends an episode when the user simulator says ``###STOP###``, when the agent transfers to a
human, or after 30 assistant steps (``max_num_steps``). ``info.source`` names only the last actor, so
an episode that used all 30 steps without either normal ending is ``max_iters``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import TrajectoryFormatError
from .trajectory import ImportedStep, Trajectory, estimate_tokens
from .text import RUN_STATUSES, as_dict, as_list, clip, content_text, first_user_text, message_chars

__all__ = ["TAU_MAX_STEPS", "chat_end", "is_episode", "parse", "parse_arguments", "tau_status"]

TAU_MAX_STEPS = 30
_TAU_STOP = "###STOP###"
_TAU_TRANSFER = "transfer_to_human_agents"


def is_episode(value: Any) -> bool:
    """An object holding one transcript: ``traj`` (tau-bench) or ``messages`` with tool traffic."""
    return isinstance(value, dict) and isinstance(value.get("traj", value.get("messages")), list)


def parse_arguments(arguments: Any) -> tuple[Any, str | None]:
    """(args, error_type): JSON text parsed; text that is not JSON kept as written, ``invalid_arguments``."""
    if not isinstance(arguments, str):
        return arguments, None
    try:
        return json.loads(arguments), None
    except (ValueError, RecursionError):
        return arguments, "invalid_arguments"


def tau_status(messages: list[Any], source: Any) -> tuple[str, str | None]:
    """(run status, error text) of a tau-bench episode."""
    assistant_turns = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
    last = messages[-1] if messages else None
    stopped = (isinstance(last, dict) and last.get("role") == "user"
               and _TAU_STOP in content_text(last.get("content")))
    if assistant_turns >= TAU_MAX_STEPS and not stopped and source != _TAU_TRANSFER:
        return "max_iters", (f"the episode used all {TAU_MAX_STEPS} assistant steps without ending "
                             f"(last actor: {source!r})")
    return "ok", None


def chat_end(messages: list[Any]) -> str:
    """A transcript that records no status ended normally only if the assistant had the last word
    (a reply with no tool calls: its answer); one that stops on a tool call, a tool result or the
    user's message has no recorded end. Nor does one where assistants of two names or more take
    turns (a group chat: one of them always has the last word; the analyzer reads how it ended)."""
    names = {m.get("name") for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
             and isinstance(m.get("name"), str) and m.get("name")}
    last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") != "system"), None)
    if isinstance(last, dict) and last.get("role") == "assistant" and not _calls(last) and len(names) < 2:
        return "ok"
    return "incomplete"


def _declared_tools(*holders: dict[str, Any]) -> set[str] | None:
    for h in holders:
        tools = h.get("tools")
        if isinstance(tools, list):
            names = set()
            for t in tools:
                fn = t.get("function", t) if isinstance(t, dict) else None
                name = fn.get("name") if isinstance(fn, dict) else t if isinstance(t, str) else None
                if isinstance(name, str):
                    names.add(name)
            return names
    return None


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    calls = message.get("tool_calls")
    if calls is None and isinstance(message.get("function_call"), dict):  # the pre-tools API
        calls = [{"function": message["function_call"]}]
    return [c if isinstance(c, dict) else {} for c in as_list(calls, "'tool_calls'")] if calls else []


def _observe(call: ImportedStep, message: dict[str, Any]) -> None:
    text = content_text(message.get("content"))
    call.observation = text
    if call.error_type is None and text.startswith(("Unknown action", "Unknown tool")):
        call.is_error, call.error_type = True, "tool_not_found"
    elif call.error_type is None and text.startswith("Error"):  # tau-bench tools answer "Error: ..."
        call.is_error, call.error_type = True, "tool_error"


def _steps(messages: list[Any], declared: set[str] | None) -> list[ImportedStep]:
    steps: list[ImportedStep] = []
    waiting: list[ImportedStep] = []  # calls not yet answered, oldest first
    chars = 0
    n = 0
    for i, raw in enumerate(messages):
        m = as_dict(raw, f"message {i}")
        role = m.get("role")
        if role == "assistant":
            n += 1
            thought = content_text(m.get("content")) or None
            context = estimate_tokens(chars)
            calls = _calls(m)
            if not calls:
                steps.append(ImportedStep(step=n, thought=thought, context_tokens=context))
            for k, call in enumerate(calls):
                fn = call["function"] if isinstance(call.get("function"), dict) else call
                name = fn.get("name") if isinstance(fn.get("name"), str) else None
                args, error_type = parse_arguments(fn.get("arguments"))
                if name is None:
                    error_type = "unparseable"
                elif declared is not None and name not in declared:
                    error_type = "tool_not_found"
                step = ImportedStep(
                    step=n, thought=thought if k == 0 else None, tool=name, args=args,
                    is_error=error_type is not None, error_type=error_type, call_index=k,
                    tool_call_id=call.get("id") if isinstance(call.get("id"), str) else None,
                    context_tokens=context if k == 0 else None,
                )
                steps.append(step)
                waiting.append(step)
        elif role in ("tool", "function") and waiting:
            call_id, name = m.get("tool_call_id"), m.get("name")
            match = (next((c for c in waiting if call_id and c.tool_call_id == call_id), None)
                     or next((c for c in waiting if name and c.tool == name), None) or waiting[0])
            waiting = [c for c in waiting if c is not match]
            _observe(match, m)
        chars += message_chars(m)
    return steps


def _episode(d: dict[str, Any], path: Path, key: str) -> Trajectory:
    tau = "traj" in d
    messages = as_list(d.get("traj") if tau else d.get("messages"), "'traj'" if tau else "'messages'")
    info = as_dict(d.get("info"), "'info'")
    attributes: dict[str, Any] = {"format": "tau-bench" if tau else "openai-chat"}
    if tau:
        status, error = tau_status(messages, info.get("source"))
        attributes.update({k: v for k, v in (("source", info.get("source")), ("reward", d.get("reward")),
                                             ("task_id", d.get("task_id")), ("trial", d.get("trial")),
                                             ("user_cost", info.get("user_cost"))) if v is not None})
        task_info = info.get("task")
        task = task_info.get("instruction") if isinstance(task_info, dict) else None
    else:
        status = d["status"] if d.get("status") in RUN_STATUSES else chat_end(messages)
        error = d.get("error") if isinstance(d.get("error"), str) else None
        task = None
    model = d.get("model", info.get("model"))
    steps = _steps(messages, _declared_tools(d, info))
    if messages and not steps and status in ("ok", "incomplete") and not error:
        raise TrajectoryFormatError(f"no assistant turns: {len(messages)} messages, none by the assistant")
    # The assistant's last word, a reply with no tool calls after which nothing but a system note came,
    # is its answer (docs/importers.md); a run cut on a call or a person's message has none.
    last = next((m for m in reversed(messages) if isinstance(m, dict) and m.get("role") != "system"), None)
    answer = (content_text(last.get("content")) or None
              if status == "ok" and isinstance(last, dict) and last.get("role") == "assistant" and not _calls(last)
              else None)
    return Trajectory(
        source=str(path), agent="tau-bench" if tau else "openai-chat", status=status,
        steps=steps, answer=answer,
        task=clip(task if isinstance(task, str) else first_user_text(messages)),
        model=model if isinstance(model, str) and model else None, error=error, attributes=attributes,
        key=key,
    )


def parse(data: Any, path: Path) -> list[Trajectory]:
    if isinstance(data, list) and data and not any(is_episode(item) for item in data):
        return [_episode({"messages": data}, path, "")]  # a bare message list: one run
    if isinstance(data, list):  # a results file: one episode per item
        out = []
        for i, item in enumerate(data):
            d = as_dict(item, f"item {i}")
            ids = [str(d[k]) for k in ("task_id", "trial") if d.get(k) is not None]
            out.append(_episode(d, path, "/".join(ids) if ids else str(i)))
        if len({t.key for t in out}) < len(out):  # ids repeat: fall back to positions
            for i, t in enumerate(out):
                t.key = str(i)
        return out
    return [_episode(as_dict(data, "the file"), path, "")]
