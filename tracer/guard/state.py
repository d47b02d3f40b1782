"""One run under a guard: facts in, at most one finding per limit out. Pure: no spans, no I/O.

The caller (``spans/guarding.py`` for a live agent, ``ingest/otlp/alerts.py`` for a run still going in
``looptrace collect``) feeds each finished step (``observe``) and each model response (``response``),
and asks ``check`` before the next request. ``check`` decides the action: ``warn`` reports each finding
once; ``reflect`` asks for a reflection turn on a repeat, ``max_reflections`` times, then stops; ``stop``
stops. A run that was stopped stays stopped: every later check returns the same finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..rules import Act, RepeatWatch
from ..rules import Finding as Repeat
from .limits import REFLECTION, Finding, Guard

__all__ = ["RunGuard", "describe"]


class RunGuard:
    def __init__(self, guard: Guard, run_id: str, agent: str | None = None) -> None:
        self.guard, self.run_id, self.agent = guard, run_id, agent
        self.calls = 0
        self.spend_usd = 0.0
        self.unpriced_calls = 0
        self.tokens = 0
        self.reflections = 0
        self.stopped: Finding | None = None
        self.thresholds = guard.rule_thresholds()
        self._repeats = RepeatWatch(self.thresholds) if guard.max_repeats else None
        self._repeat: Repeat | None = None
        self._observed = 0  # the last step fed
        self._reported: set[tuple[str, int | None]] = set()
        self._unpriced_models: set[str] = set()

    # -- facts ------------------------------------------------------------------------------------

    def observe(self, step: int, acts: Sequence[Act]) -> None:
        """A step that has finished (its tool results are known), as the rules' acts (``facts.step_acts``).
        Steps are fed once, in order; a repeat found stays pending until ``check`` acts on it."""
        if step <= self._observed:
            return
        self._observed = step
        if self._repeats is not None:
            for act in acts:
                found = self._repeats.add_act(act)
                self._repeat = found or self._repeat

    @property
    def observed(self) -> int:
        return self._observed

    def response(self, model: str | None, tokens: int, cost_usd: float, priced: bool) -> bool:
        """A model response's usage. True the first time a model with no price is seen under ``max_usd``:
        the caller says so (the rule cannot count that call's dollars, and does not count them as 0)."""
        self.tokens += tokens
        self.spend_usd += cost_usd
        if priced:
            return False
        self.unpriced_calls += 1
        name = model or "(no model)"
        if self.guard.max_usd is None or name in self._unpriced_models:
            return False
        self._unpriced_models.add(name)
        return True

    # -- the decision -----------------------------------------------------------------------------

    def check(self, request_tokens: int | None = None) -> Finding | None:
        """Before a model request: the finding that acts on it, or None to let it go (and count it)."""
        if self.stopped is not None:
            return self.stopped
        found = self._limit(request_tokens)
        if found is None:
            self.calls += 1
            return None
        key = (found.rule, found.first_step)
        action = self.guard.action
        if action == "warn":
            self.calls += 1
            if key in self._reported:
                return None
            self._reported.add(key)
            return replace(found, action="warn")
        if action == "reflect" and found.rule == "max_repeats" and self.reflections < self.guard.max_reflections:
            self.reflections += 1
            self.calls += 1
            self._repeat = None
            self._repeats = RepeatWatch(self.thresholds)  # count afresh from the reflection, as the loop does
            return replace(found, action="reflect")
        self.stopped = replace(found, action="stop")
        return self.stopped

    def _finding(self, rule: str, message: str, steps: tuple[int, ...] = (), **evidence: object) -> Finding:
        return Finding(rule, self.run_id, message, steps, self.calls, self.spend_usd, self.unpriced_calls,
                       self.tokens, agent=self.agent, evidence=dict(evidence))

    def _limit(self, request_tokens: int | None) -> Finding | None:
        g = self.guard
        if self._repeat is not None:
            r = self._repeat
            return self._finding(
                "max_repeats", f"looptrace guard: {r.message}; max_repeats={g.max_repeats}", r.steps,
                kind=r.rule, tool=r.tool, repeats=r.calls, period=r.period, detail=describe(r),
                wasted_tokens=r.tokens, wasted_usd=None if r.cost_usd is None else round(r.cost_usd, 6))
        if g.max_calls is not None and self.calls >= g.max_calls:
            return self._finding("max_calls", f"looptrace guard: {self.calls} model calls made; max_calls={g.max_calls}")
        if g.max_usd is not None and self.spend_usd >= g.max_usd:
            unpriced = f" (+{self.unpriced_calls} calls with no price)" if self.unpriced_calls else ""
            return self._finding("max_usd", f"looptrace guard: ${self.spend_usd:.4f} spent{unpriced}; "
                                 f"max_usd={g.max_usd:g}")
        if g.max_context_tokens is not None and request_tokens is not None and request_tokens > g.max_context_tokens:
            return self._finding("max_context_tokens", f"looptrace guard: the next request holds about "
                                 f"{request_tokens} tokens; max_context_tokens={g.max_context_tokens}",
                                 request_tokens=request_tokens)
        return None

    def reflection(self, finding: Finding) -> str:
        """The reflection turn for a repeat finding."""
        return REFLECTION.format(detail=finding.evidence.get("detail") or finding.message)


def describe(r: Repeat) -> str:
    """The repeat in the agent's terms, for its reflection turn."""
    if r.rule == "failing":
        return f"called {r.tool} {r.calls} times in a row and it failed with the same error each time"
    if r.rule == "repeat":
        return f"called {r.tool} with the same arguments {r.calls} times in a row, with nothing new coming back"
    if r.rule == "cycle":
        return f"repeated the same {r.period} actions {r.calls // r.period} times over with the same results"
    return f"got the same answer from {r.calls} different actions in a row"
