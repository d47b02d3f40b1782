"""Stagnation: the same action again and again, or a short cycle of actions (pure functions).

An action's signature is the one identity every part of looptrace uses (``records/actions.py``): its
tool name plus canonical JSON arguments, so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are the same
action while two reads of different files are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from looptrace.tracer.records.actions import call_action

__all__ = ["signature", "Repetition", "find_repetition"]


def signature(tool: str, args: Any) -> str:
    return str(call_action(tool, args))


@dataclass(frozen=True)
class Repetition:
    kind: str  # "repeat" (same action) or "cycle" (A, B, A, B, ...)
    period: int
    length: int  # how many trailing actions the repetition covers


def find_repetition(actions: Sequence[str], window: int, max_cycle: int = 3) -> Repetition | None:
    """The repetition at the end of ``actions``: the same action ``window`` times in a row, or a
    cycle of 2..``max_cycle`` distinct actions repeated ``window - 1`` times (at least twice)."""
    if window < 2:
        return None
    if len(actions) >= window and len(set(actions[-window:])) == 1:
        return Repetition("repeat", 1, window)
    repeats = max(2, window - 1) if window > 2 else 2
    for period in range(2, max_cycle + 1):
        span = period * repeats
        if len(actions) < span:
            break
        cycle = list(actions[-period:])
        if len(set(cycle)) < 2:
            continue
        if all(actions[-span + i] == cycle[i % period] for i in range(span)):
            return Repetition("cycle", period, span)
    return None
