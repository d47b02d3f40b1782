"""What the repeat rules read (``Act``: one tool call as plain data) and what they return (``Finding``).

An act carries identities, not texts: its action key (tool + canonical arguments,
``records/actions.py``) and its outcome key (the observation up to clock readings and ids, or up to
its numbers when long: ``outcome_key``). The analyzer reads both keys from the store; the loop and a
live guard compute them from the call they just saw with the same functions, so the three compare
the same things.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from looptrace.tracer.records.actions import near_observation_key, progress_key

from .thresholds import Thresholds

__all__ = ["Act", "Finding", "RULES", "outcome_key", "finding"]

RULES = ("repeat", "cycle", "failing", "same_observation")
"""The repeat rules, in the order a tie is broken (the first listed wins)."""


class Act(NamedTuple):
    """One tool call, in the order the agent made them."""

    step: int
    action: str | None  # the action key; None: not an action (a step with no tool call)
    outcome: str | None = None  # outcome_key of what came back; None: nothing came back
    is_error: bool = False
    tool: str | None = None
    tokens: int | None = None  # the step's tokens and cost, given on one call of the step only
    cost_usd: float | None = None
    size: int = 0  # bytes of the observation (the same-observation check ignores short ones)


def outcome_key(observation: str | None, t: Thresholds) -> str | None:
    """The key two observations share when repeating the call brought nothing new: ``progress_key``,
    or ``near_observation_key`` for an observation of at least ``t.near_same_min_bytes`` bytes (the
    store keeps both per call; the analyzer picks between them the same way)."""
    if observation is None:
        return None
    if len(observation.encode("utf-8")) >= t.near_same_min_bytes:
        return near_observation_key(observation)
    return progress_key(observation)


@dataclass(frozen=True)
class Finding:
    """A repetition with no progress: which rule, which calls, what they cost.

    ``start`` and ``calls`` place the streak in the sequence of acts evaluated (indexes from 0);
    ``tripped_at`` is the step of the call at which it reached its threshold, the moment a live guard
    fed one call at a time learns of it. ``tokens`` and ``cost_usd`` add up the streak's steps
    (None when none of them recorded any)."""

    rule: str  # one of RULES
    start: int
    calls: int
    steps: tuple[int, ...]
    tripped_at: int
    period: int = 1  # a cycle's length in actions; 1 for the others
    no_progress: int = 0  # repeat: its first call plus every call whose outcome was already seen
    tokens: int | None = None
    cost_usd: float | None = None
    tool: str | None = None
    message: str = ""

    @property
    def first_step(self) -> int:
        return self.steps[0]

    @property
    def last_step(self) -> int:
        return self.steps[-1]


def _span(steps: Sequence[int]) -> str:
    return f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"


def _spend(tokens: int | None, cost: float | None) -> str:
    parts = [f"{tokens:,} tokens"] if tokens is not None else []
    parts += [f"${cost:.4f}"] if cost is not None else []
    return f" ({', '.join(parts)})" if parts else ""


def finding(rule: str, acts: Sequence[Act], start: int, calls: int, tripped_at: int, *, period: int = 1,
            no_progress: int = 0) -> Finding:
    """The finding for ``acts[start:start + calls]``, with its steps, spend and message. Built the
    same way by the batch rules and the watch, so the two give equal values for one streak."""
    own = acts[start:start + calls]
    steps = tuple(sorted({a.step for a in own}))
    tokens = [a.tokens for a in own if a.tokens is not None]
    costs = [a.cost_usd for a in own if a.cost_usd is not None]
    total_tokens = sum(tokens) if tokens else None
    total_cost = sum(costs) if costs else None
    tool = own[0].tool
    name = repr(tool) if tool is not None else "an action"
    if rule == "repeat":
        text = f"the same call of {name} {calls} times in a row, {no_progress} with no new result"
    elif rule == "failing":
        text = f"{name} failed {calls} times in a row with the same error"
    elif rule == "cycle":
        text = f"a cycle of {period} actions repeated {calls // period} times with the same results"
    else:
        text = f"{calls} actions in a row returned the same observation"
    message = f"{text}, at {_span(steps)}{_spend(total_tokens, total_cost)}"
    return Finding(rule, start, calls, steps, tripped_at, period, no_progress, total_tokens, total_cost, tool,
                   message)
