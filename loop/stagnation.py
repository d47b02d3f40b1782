"""The loop's stagnation check: the rules layer's repeat rules (``looptrace.tracer.rules``) with the
loop's own thresholds.

The loop intervenes cheaply (a reflection turn) where the analyzer names a failure, so it trips
sooner: the same action ``Policy.stagnation_window`` times in a row with no new result, the same tool
failing that many times, or a cycle of 2..``max_cycle_length`` actions repeated ``window - 1`` times
(at least twice). The definitions, and what "no new result" means, are the analyzer's and a live
guard's: one implementation (``RepeatWatch``), three users.

An action's signature is the one identity every part of looptrace uses (``records/actions.py``): its
tool name plus canonical JSON arguments, so ``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are the same
action while two reads of different files are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from looptrace.tracer.records.actions import call_action
from looptrace.tracer.rules import Finding, RepeatWatch, Thresholds

__all__ = ["signature", "Repetition", "find_repetition", "loop_thresholds", "watch", "repetition"]


def signature(tool: str, args: Any) -> str:
    return str(call_action(tool, args))


@dataclass(frozen=True)
class Repetition:
    kind: str  # "repeat" (same action), "cycle" (A, B, A, B, ...) or "failing" (the same tool failing)
    period: int
    length: int  # how many trailing actions the repetition covers


def loop_thresholds(window: int, max_cycle: int = 3) -> Thresholds:
    """The rules' thresholds for the loop's ``stagnation_window`` and ``max_cycle_length`` (a window
    below 2 turns the check off). "Different actions, one answer" is left to the analyzer."""
    on = window if window >= 2 else 0
    return Thresholds(repeat_min=on, fail_repeat_min=on, cycle_repeats=max(2, window - 1) if on else 0,
                      cycle_max_period=max_cycle, same_observation_min=0)


def watch(window: int, max_cycle: int = 3) -> RepeatWatch:
    return RepeatWatch(loop_thresholds(window, max_cycle))


def repetition(f: Finding) -> Repetition:
    return Repetition(f.rule, f.period, f.calls)


def find_repetition(actions: Sequence[str], window: int, max_cycle: int = 3) -> Repetition | None:
    """The repetition going on at the end of ``actions`` (signatures, outcomes unknown: every repeat
    counts as no progress)."""
    w = watch(window, max_cycle)
    for i, a in enumerate(actions):
        w.add(i + 1, a)
    found = w.current()
    return repetition(found) if found is not None else None
