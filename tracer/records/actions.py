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
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson

from .forkgate import ARROW_GATE
from .text import canonical_json

__all__ = [
    "call_action", "call_key", "step_key", "observation_key", "same_observation", "STEP_ACTION_KEY_SQL",
    "OBSERVATION_KEY_SQL", "progress_key", "PROGRESS_KEY_SQL", "VOLATILE",
    "near_observation_key", "NEAR_OBSERVATION_KEY_SQL", "progress_keys", "near_observation_keys", "key_or_none",
]


def _arguments(args: Any) -> Any:
    """Arguments as a value: JSON text is parsed, so stored and live arguments compare equal."""
    if isinstance(args, str):
        try:
            return orjson.loads(args)
        except orjson.JSONDecodeError:
            try:
                return json.loads(args)  # what orjson refuses but Python reads (NaN, big numbers)
            except ValueError:
                return args  # not JSON (a raw command line): the text itself is the argument
    return args


def _canonical(value: Any) -> str:
    # The sink keys every tool call it writes, so this is hot: orjson with sorted keys is ~10x faster
    # than canonical_json. What orjson refuses or would write as null (NaN, lone surrogates, big ints,
    # objects) takes canonical_json; a value always takes the same path, so equal values, equal text.
    try:
        raw = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        if b"null" not in raw or "null" in canonical_json(value):
            return raw.decode()
    except TypeError:
        pass
    return canonical_json(value)


def call_action(tool: str | None, args: Any) -> str | None:
    """The readable identity of one tool call: ``tool {canonical args}``; None without a tool."""
    if tool is None:
        return None
    return f"{tool} {_canonical(_arguments(args))}"


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
# everything else (file offsets, line numbers, percentages, exit codes, counts) is content: paging
# through a file or polling a job that advances is progress. The patterns are one alternation, valid
# both in Python ``re`` and in DuckDB's RE2 (leftmost-first in both, ASCII classes), so the SQL keys
# agree with the Python ones; one regex pass keeps the analyzer's scan of every observation cheap.
VOLATILE: tuple[str, ...] = (
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})?",  # ISO time
    r"\b[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?\b",  # clock time
    r"\b[0-9]+(\.[0-9]+)? ?(seconds|second|secs|sec|ms|us|ns|s)\b",  # duration
    r"0x[0-9a-fA-F]+",  # address
    r"\b(ba|z|da)?sh: line [0-9]+:",  # the shell's input line counter, not the error
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b",  # UUID
)
_VOLATILE_RE = "|".join(f"(?:{p})" for p in VOLATILE)
# Volatile parts first, so a time is not read as three numbers; whitespace goes too (re-indented text
# says the same words).
_NUMBERS_RE = _VOLATILE_RE + "|[0-9]+|[ \\t\\r\\n\\f\\v]+"
# Python's engine tries every alternative at every position; a lookahead for the characters some
# alternative can start with (a digit, ``0x``, a hex digit of a UUID, the ``b``/``z``/``d``/``s`` of
# ``sh: line``, spacing) rejects the other positions at once: the same matches, about twice as fast
# (the sink keys every observation it writes).
_VOLATILE = re.compile(f"(?=[0-9a-fsz])(?:{_VOLATILE_RE})", re.ASCII)
_NUMBERS = re.compile(f"(?=[0-9a-fsz \\t\\r\\n\\f\\v])(?:{_NUMBERS_RE})", re.ASCII)


def progress_key(observation: str | None) -> str | None:
    """Equal keys: the same observation but for its volatile parts (``VOLATILE``); None for none."""
    return None if observation is None else _md5(_VOLATILE.sub("~", observation))


# Near-same: the words are the same and only numbers (and spacing) differ. In a long output (a file view after an
# edit that changed nothing but its line count) that is the same information again; in a short one
# (``40% done`` then ``50% done``, an exit code) the number is the news. Which one applies is the
# caller's choice, by the observation's size.
def near_observation_key(observation: str | None) -> str | None:
    """Equal keys: the same observation but for volatile parts, the values of its numbers and spacing."""
    return None if observation is None else _md5(_NUMBERS.sub("", observation))


# Each key is one regex pass in SQL too: measured on the shared corpus (12.6k steps, 19 MB of
# observations) both keys together cost about 1.5 s more than a plain md5.
PROGRESS_KEY_SQL = f"md5(regexp_replace(observation, '{_VOLATILE_RE}', '~', 'g'))"
NEAR_OBSERVATION_KEY_SQL = f"md5(regexp_replace(observation, '{_NUMBERS_RE}', '', 'g'))"


# The same two keys for a whole column at once (the sink keys every batch of tool calls it writes): one
# regex pass over the column in RE2 through Arrow, the engine the SQL forms above run in (the patterns
# are written for both), then an md5 per value. Python's engine costs a call and a match setup per value.
def progress_keys(observations: Sequence[object]) -> list[str | None]:
    """``progress_key`` of each observation (None for a value that is not text)."""
    return _column_keys(observations, _VOLATILE_RE, "~", progress_key)


def near_observation_keys(observations: Sequence[object]) -> list[str | None]:
    """``near_observation_key`` of each observation (None for a value that is not text)."""
    return _column_keys(observations, _NUMBERS_RE, "", near_observation_key)


def _column_keys(observations: Sequence[object], pattern: str, replacement: str,
                 one: Callable[[str | None], str | None]) -> list[str | None]:
    import pyarrow as pa
    import pyarrow.compute as pc

    if not set(map(type, observations)) <= _TEXT_OR_NONE:  # Arrow would take bytes as text
        return [key_or_none(one, o) for o in observations]
    with ARROW_GATE:  # the sink keys columns on the span processor's thread: no fork meanwhile (forkgate.py)
        try:
            column = pa.array(observations, type=pa.string())
        except (pa.ArrowException, UnicodeError):  # a lone surrogate: one value at a time
            column = None
        masked = None if column is None else pc.replace_substring_regex(
            column, pattern=pattern, replacement=replacement).to_pylist()
    if masked is None:
        return [key_or_none(one, o) for o in observations]
    return [None if m is None else _md5(m) for m in masked]


_TEXT_OR_NONE = frozenset({str, type(None)})


def key_or_none(one: Callable[[str | None], str | None], observation: object) -> str | None:
    """``one(observation)``, or None where it has no key."""
    # A value that is not text, or text that cannot be encoded, gets no key: the analyzer computes a
    # missing key itself, and a write never fails for want of one.
    if not isinstance(observation, str):
        return None
    try:
        return one(observation)
    except (UnicodeError, ValueError):
        return None
