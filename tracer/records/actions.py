"""When two steps are the same action: the one definition the loop, analyzer, diff and viewer share.

A tool call's action is its tool name and its arguments as canonical JSON (keys sorted, compact), so
``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are one action, arguments stored as JSON text equal the
same arguments passed as values, and two reads of different files are two actions. A step's action
is its calls' actions in call order; a step without a tool call (a final answer) has none.

Whether a repeated action made progress is a separate question, asked where it matters (stagnation
is the same action with the same observation): ``observation_key`` says when two observations are
the same (``OBSERVATION_KEY_SQL`` in SQL), ``progress_key`` when they are the same but for clock
readings, durations and addresses, i.e. the repeat learned nothing new (``PROGRESS_KEY_SQL``).

The store keeps each call's ``action_key`` (filled by the sink), so SQL sees the same identity:
``STEP_ACTION_KEY_SQL`` aggregates a step's keys the way ``step_key`` does.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

from .text import canonical_json

__all__ = [
    "call_action", "call_key", "step_key", "observation_key", "same_observation", "STEP_ACTION_KEY_SQL",
    "OBSERVATION_KEY_SQL", "progress_key", "PROGRESS_KEY_SQL", "VOLATILE",
    "near_observation_key", "NEAR_OBSERVATION_KEY_SQL",
]


def _arguments(args: Any) -> Any:
    """Arguments as a value: JSON text is parsed, so stored and live arguments compare equal."""
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args  # not JSON (a raw command line): the text itself is the argument
    return args


def call_action(tool: str | None, args: Any) -> str | None:
    """The readable identity of one tool call: ``tool {canonical args}``; None without a tool."""
    if tool is None:
        return None
    return f"{tool} {canonical_json(_arguments(args))}"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def call_key(tool: str | None, args: Any) -> str | None:
    """``call_action`` hashed: what the store keeps in ``tool_call_records.action_key``."""
    action = call_action(tool, args)
    return None if action is None else _md5(action)


def step_key(call_keys: Iterable[str | None]) -> str | None:
    """A step's action from its calls' keys in call order (what ``STEP_ACTION_KEY_SQL`` computes)."""
    keys = [k for k in call_keys if k is not None]
    return _md5("\n".join(keys)) if keys else None


# A step's action in SQL over the ``steps`` view (one row per call), grouped by step.
STEP_ACTION_KEY_SQL = (
    "CASE WHEN count(action_key) = 0 THEN NULL "
    "ELSE md5(string_agg(action_key, chr(10) ORDER BY call_index)) END"
)


def observation_key(observation: str | None) -> str | None:
    """Equal keys, same observation; None for none."""
    return None if observation is None else _md5(observation)


OBSERVATION_KEY_SQL = "md5(observation)"


def same_observation(a: str | None, b: str | None) -> bool:
    return observation_key(a) == observation_key(b)


# Did a repeated action make progress? Only if what came back changed in substance. Clock readings,
# durations, memory addresses and ids change on every call without telling the agent anything new,
# so they are masked (so is the line counter an interactive shell puts in front of each error);
# everything else (file offsets, line numbers, percentages, exit codes, counts)
# is content: paging through a file or polling a job that advances is progress. Each pattern is
# valid both in Python ``re`` and in DuckDB's RE2, so ``PROGRESS_KEY_SQL`` agrees with ``progress_key``.
VOLATILE: tuple[tuple[str, str], ...] = (
    (r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(\.\d+)?\b", "<time>"),
    (r"\b\d+(\.\d+)? ?(seconds|second|secs|sec|ms|us|ns|s)\b", "<duration>"),
    (r"0x[0-9a-fA-F]+", "<address>"),
    (r"\b(ba|z|da)?sh: line [0-9]+:", "sh: line <n>:"),  # the shell's input line counter, not the error
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<id>"),
    (r"[ \t\r\n\f\v]+", " "),
)
_VOLATILE = tuple((re.compile(p, re.ASCII), r) for p, r in VOLATILE)  # RE2's \d and \b are ASCII too


def progress_key(observation: str | None) -> str | None:
    """Equal keys: the same observation but for its volatile parts (``VOLATILE``); None for none."""
    if observation is None:
        return None
    for rx, replacement in _VOLATILE:
        observation = rx.sub(replacement, observation)
    return _md5(observation.strip())


# Near-same: the words are the same and only numbers differ. In a long output (a file view after an
# edit that changed nothing but its line count) that is the same information again; in a short one
# (``40% done`` then ``50% done``, an exit code) the number is the news. Which one applies is the
# caller's choice, by the observation's size.
_NUMBER = r"[0-9]+"


def near_observation_key(observation: str | None) -> str | None:
    """Equal keys: the same observation but for volatile parts and the values of its numbers."""
    if observation is None:
        return None
    for rx, replacement in _VOLATILE:
        observation = rx.sub(replacement, observation)
    return _md5(re.sub(_NUMBER, "#", observation).strip())


def _masked_sql(patterns: tuple[tuple[str, str], ...]) -> str:
    expr = "observation"
    for pattern, replacement in patterns:
        expr = f"regexp_replace({expr}, '{pattern}', '{replacement}', 'g')"
    return f"md5(trim({expr}))"


PROGRESS_KEY_SQL = _masked_sql(VOLATILE)
NEAR_OBSERVATION_KEY_SQL = _masked_sql((*VOLATILE, (_NUMBER, "#")))
