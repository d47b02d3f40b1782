"""What a guard enforces (``Guard``), what it found (``Finding``) and how it stops (``GuardTripped``).

Every limit is optional and named after the run status it leads to, the loop's own vocabulary
(``RUN_STATUSES``): too many model calls is ``max_iters``, spend is ``budget_exceeded``, the same
action again and again is ``stagnated``, a request over the context limit is ``context_overflow``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from ..rules import DEFAULT_THRESHOLDS, Thresholds

__all__ = ["Guard", "GuardTripped", "Finding", "ACTIONS", "Action", "RULE_STATUS", "REFLECTION"]

Action = Literal["stop", "reflect", "warn"]
ACTIONS: tuple[str, ...] = ("stop", "reflect", "warn")

# Each rule, and the status a run it stops is stored with.
RULE_STATUS: dict[str, str] = {
    "max_calls": "max_iters",
    "max_usd": "budget_exceeded",
    "max_repeats": "stagnated",
    "max_context_tokens": "context_overflow",
}

# The turn ``reflect`` adds to the next request: the loop's own intervention (loop/agent.py, REFLECTION),
# worded for an agent that is not looptrace's.
REFLECTION = (
    "[looptrace guard] You have {detail}. It is not making progress. Step back: try something different, "
    "or give your best answer now."
)


@dataclass(frozen=True)
class Guard:
    """Limits on one run, checked before each model request; ``None`` turns a limit off.

    ``max_calls``: model calls per run. ``max_usd``: dollars per run, from each response's usage and the
    price table (``records/pricing.py``; a model with no price is reported once, and its calls are not
    counted as free). ``max_repeats``: the same action this many times in a row with nothing new coming
    back (same tool and arguments), or the same tool failing this many times with the same error: the
    rules layer's ``repeat`` and ``failing`` rules (``looptrace.tracer.rules``), evaluated one call at a
    time; its ``cycle`` and ``same_observation`` rules apply too, at ``thresholds`` (the analyzer's
    defaults unless given). ``max_context_tokens``: the estimated input tokens of the next request.

    ``action``: ``stop`` raises ``GuardTripped`` from the model call before its request is sent;
    ``reflect`` first adds one reflection turn to the next request (repeats only: a spent dollar is
    not given back by reflecting) and stops if the rule trips again; ``warn`` records and logs the
    finding and never changes what the agent does.
    """

    max_calls: int | None = None
    max_usd: float | None = None
    max_repeats: int | None = None
    max_context_tokens: int | None = None
    action: Action = "stop"
    max_reflections: int = 1
    thresholds: Thresholds | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"Guard action must be one of {', '.join(ACTIONS)}, got {self.action!r}")
        for name in ("max_calls", "max_repeats", "max_context_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"Guard {name} must be a positive whole number or None, got {value!r}")
        if self.max_repeats is not None and self.max_repeats < 2:
            raise ValueError(f"Guard max_repeats must be at least 2 (one call is not a repeat), got {self.max_repeats}")
        if self.max_usd is not None and (isinstance(self.max_usd, bool) or not isinstance(self.max_usd, (int, float))
                                         or self.max_usd <= 0):
            raise ValueError(f"Guard max_usd must be a positive number of dollars or None, got {self.max_usd!r}")
        if self.max_reflections < 0:
            raise ValueError(f"Guard max_reflections must be 0 or more, got {self.max_reflections}")

    def rule_thresholds(self) -> Thresholds:
        """The rules layer's thresholds this guard applies: ``thresholds`` (or the analyzer's defaults)
        with ``repeat_min`` and ``fail_repeat_min`` set to ``max_repeats``."""
        base = self.thresholds or DEFAULT_THRESHOLDS
        if self.max_repeats is None:
            return replace(base, repeat_min=0, fail_repeat_min=0, cycle_repeats=0, same_observation_min=0)
        return replace(base, repeat_min=self.max_repeats, fail_repeat_min=self.max_repeats)

    @property
    def limits(self) -> dict[str, float | int]:
        """The limits that are set, by rule name."""
        return {rule: value for rule in RULE_STATUS if (value := getattr(self, rule)) is not None}


@dataclass(frozen=True)
class Finding:
    """A limit a run reached: which, where (the steps that prove it) and what the run had spent."""

    rule: str  # a key of RULE_STATUS
    run_id: str
    message: str
    steps: tuple[int, ...] = ()  # the evidence: for repeats, the repeated steps
    calls: int = 0  # model calls made so far
    spend_usd: float = 0.0  # priced spend so far
    unpriced_calls: int = 0  # calls whose model has no price: their cost is unknown, not zero
    tokens: int = 0  # input + output tokens so far
    action: str = "stop"  # what the guard did: stop, reflect or warn
    agent: str | None = None
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return RULE_STATUS[self.rule]

    @property
    def first_step(self) -> int | None:
        return self.steps[0] if self.steps else None

    @property
    def last_step(self) -> int | None:
        return self.steps[-1] if self.steps else None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: what an alert hook receives and what the step event records."""
        return {"rule": self.rule, "status": self.status, "run_id": self.run_id, "agent": self.agent,
                "message": self.message, "steps": list(self.steps), "first_step": self.first_step,
                "last_step": self.last_step, "calls": self.calls, "spend_usd": round(self.spend_usd, 6),
                "unpriced_calls": self.unpriced_calls, "tokens": self.tokens, "action": self.action,
                "evidence": self.evidence}


class GuardTripped(Exception):
    """Raised from a model call, before its request is sent, when a ``Guard`` stops the run."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding

    def __reduce__(self) -> tuple[Any, ...]:  # picklable: frameworks that run tools in processes re-raise it
        return (GuardTripped, (self.finding,))
