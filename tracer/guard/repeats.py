"""The seam between the guard and the stagnation rule: one step's facts in, a repeat (or None) out.

PROVISIONAL: the stagnation rule is being moved into ``looptrace.tracer.rules`` (one definition for the
loop, the analyzer and this guard); until it lands, ``RepeatSeam`` holds the smallest streak count that
lets the guard's plumbing be built and tested, and it is replaced by a call to the rules layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from .facts import StepFacts

__all__ = ["Repeat", "RepeatSeam"]


@dataclass(frozen=True)
class Repeat:
    steps: tuple[int, ...]
    tool: str | None
    failing: bool  # the same tool failing with the same error (else: the same tool and arguments)
    tokens: int
    cost_usd: float


class RepeatSeam:
    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._streak: list[StepFacts] = []

    def add(self, facts: StepFacts) -> Repeat | None:
        last = self._streak[-1] if self._streak else None
        same = last is not None and facts.action_key is not None and (
            (facts.action_key == last.action_key and facts.outcome_key == last.outcome_key)
            or (facts.is_error and last.is_error and facts.tool == last.tool and facts.outcome_key == last.outcome_key))
        self._streak = [*self._streak, facts] if same else ([facts] if facts.action_key is not None else [])
        if len(self._streak) < self.threshold:
            return None
        return Repeat(tuple(f.step for f in self._streak), facts.tool, facts.is_error,
                      sum(f.tokens for f in self._streak), sum(f.cost_usd for f in self._streak))
