"""A finished step's tool calls as the rules layer reads them (``rules.Act``): keys, not texts.

The same functions the analyzer's keys come from (``records/actions.py`` via ``rules.outcome_key``),
so a call the guard saw and the same call read back from the store compare equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..records.actions import call_key
from ..rules import Act, Thresholds, outcome_key

__all__ = ["step_acts", "Call"]

Call = tuple[str, Any, "str | None", bool]  # (tool, arguments, observation, is_error)


def step_acts(step: int, calls: Sequence[Call], t: Thresholds, tokens: int | None = None,
              cost_usd: float | None = None) -> list[Act]:
    """One ``Act`` per call, in call order; the step's tokens and cost ride on its first call. A step
    with no tool call is one act with no action (it breaks every streak, as in the analyzer)."""
    if not calls:
        return [Act(step, None, None, False, None, tokens, cost_usd)]
    return [Act(step, call_key(tool, args), outcome_key(obs, t), is_error, tool,
                tokens if i == 0 else None, cost_usd if i == 0 else None,
                len(obs.encode("utf-8")) if obs is not None else 0)
            for i, (tool, args, obs, is_error) in enumerate(calls)]
