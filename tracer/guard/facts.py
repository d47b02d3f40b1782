"""What the guard knows of one finished step: plain keys, the same ones the store keeps for each call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..records.actions import call_key, near_observation_key, progress_key, step_key

__all__ = ["StepFacts", "step_facts", "NEAR_MIN_BYTES"]

# The analyzer's near-same threshold (replay/analyzer/thresholds.py, near_same_min_bytes): a long
# observation that differs only in its numbers is the same outcome.
NEAR_MIN_BYTES = 1000


@dataclass(frozen=True)
class StepFacts:
    step: int
    action_key: str | None  # records/actions.py step_key: None for a step with no tool call
    outcome_key: str | None  # what came back, up to clock readings and ids; None without an observation
    is_error: bool
    tool: str | None  # the first call's tool (the "same tool failing with the same error" rule)
    tokens: int = 0
    cost_usd: float = 0.0


def _outcome(observation: str | None, is_error: bool) -> str:
    if observation is None:
        return "-"
    key = near_observation_key(observation) if len(observation.encode("utf-8")) >= NEAR_MIN_BYTES else progress_key(
        observation)
    return f"{key}{'!' if is_error else ''}"


def step_facts(step: int, calls: Sequence[tuple[str, Any, str | None, bool]], tokens: int = 0,
               cost_usd: float = 0.0) -> StepFacts:
    """Facts of a step from its tool calls ``(tool, args, observation, is_error)`` in call order."""
    if not calls:
        return StepFacts(step, None, None, False, None, tokens, cost_usd)
    outcomes = [_outcome(obs, err) for _, _, obs, err in calls]
    outcome = outcomes[0] if len(outcomes) == 1 else step_key(outcomes)
    return StepFacts(step, step_key(call_key(tool, args) for tool, args, _, _ in calls), outcome,
                     any(err for _, _, _, err in calls), calls[0][0], tokens, cost_usd)
