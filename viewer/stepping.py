"""Where the debugger-style keys of the replay screen jump: pure functions over a run's timeline.

A step's action is its tool calls with their arguments (``TimelineStep.action_key``, a hash of
both); a step with no tool call (a final answer) has no action and never counts as a repeat.
"""

from __future__ import annotations

from collections.abc import Sequence

from .data import TimelineStep

__all__ = ["first_error", "first_repeat", "first_divergence", "step_after"]


def first_error(steps: Sequence[TimelineStep]) -> int | None:
    """The first step with a failed tool call or a failed model call."""
    return next((s.step for s in steps if s.failed), None)


def first_repeat(steps: Sequence[TimelineStep]) -> int | None:
    """The first step whose action (tool and arguments) equals an earlier step's."""
    seen: set[str] = set()
    for s in steps:
        if s.action_key is None:
            continue
        if s.action_key in seen:
            return s.step
        seen.add(s.action_key)
    return None


def first_divergence(
    original: Sequence[tuple[int, str | None]], derived: Sequence[tuple[int, str | None]]
) -> int | None:
    """The first step at which a replay or fork (``derived``) acts differently from its original.

    Both are ``(step, action_key)`` in step order. Steps before the derived run's first recorded
    step count as shared (a fork may record only from its fork step). A run that stops earlier, or
    goes on longer, diverges at the first step only one of them has. None: same actions throughout.
    """
    if not derived:
        return original[0][0] if original else None
    ours, theirs = dict(derived), dict(original)
    start = min(ours)
    for step in sorted(set(ours) | set(theirs)):
        if step >= start and (step not in ours or step not in theirs or ours[step] != theirs[step]):
            return step
    return None


def step_after(steps: Sequence[TimelineStep], current: int | None, delta: int) -> int | None:
    """The step ``delta`` rows away from ``current`` in the timeline, clamped to its ends."""
    if not steps:
        return None
    numbers = [s.step for s in steps]
    index = numbers.index(current) if current in numbers else 0
    return numbers[max(0, min(len(numbers) - 1, index + delta))]
