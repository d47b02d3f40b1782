"""A ``Guard`` attached to a traced run: the spans' facts fed to ``RunGuard``, its verdict acted on.

The manual API calls three hooks (``Run(..., guard=)``, ``ToolCall.result``, ``LlmCall``), and so does
everything built on it (the Anthropic and OpenAI instrumentors' runs are manual-API runs), so there is
one place where a guard acts: ``before_call``, which runs when a model call is opened and before its
request can be sent. A stop records the finding as a ``guard`` event on the step whose request it
refused (on the run when that step would have been the call itself: an instrumentor's, which then
makes no step), ends that step, stores the run with the rule's status and raises ``GuardTripped``; a
reflection returns the request with one more turn; a warning is recorded and logged.

Anything that goes wrong in here other than the stop itself is logged and swallowed: a guard that
fails must not change what the agent does, and in ``warn`` mode nothing can.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..guard import Finding, Guard, GuardTripped, RunGuard, step_acts
from ..records.pricing import price_of
from ..records.text import to_json

if TYPE_CHECKING:
    from .manual import Run, Step

__all__ = ["GuardedRun", "with_reflection", "GUARD_EVENT", "UNPRICED_EVENT"]

log = logging.getLogger("looptrace.guard")

GUARD_EVENT = "guard"
UNPRICED_EVENT = "guard_unpriced"
_CHARS_PER_TOKEN = 4.0  # the context estimate's ratio before the first response calibrates it
# The rules layer's thresholds a guard sets or applies: recorded with the run for the analyzer.
GUARD_THRESHOLDS = ("repeat_min", "fail_repeat_min", "cycle_repeats", "cycle_max_period", "same_observation_min")


class GuardedRun:
    """The guard's view of one ``Run``; ``run.guard`` holds it."""

    def __init__(self, guard: Guard, run: Run) -> None:
        self.guard = guard
        self.run = run
        self.state = RunGuard(guard, run.run_id, run.agent)
        self._lock = threading.Lock()
        self._calls: dict[int, dict[int, tuple[str, Any, str | None, bool]]] = {}
        self._usage: dict[int, tuple[int, float]] = {}
        self._chars_per_token = _CHARS_PER_TOKEN
        self._last_chars = 0

    def describe(self) -> str:
        """The guard as the run records it (``looptrace.run.guard``): limits, action, rule thresholds."""
        t = self.state.thresholds
        return to_json({"limits": self.guard.limits, "action": self.guard.action,
                        "thresholds": {k: getattr(t, k) for k in GUARD_THRESHOLDS}})

    # -- facts, from the manual API's hooks -------------------------------------------------------

    def tool_result(self, step: int, index: int, tool: str, args: Any, observation: str | None,
                    is_error: bool) -> None:
        with self._lock:
            self._calls.setdefault(step, {})[index] = (tool, args, observation, is_error)

    def response(self, step: Step | None, model: str, total_input: int, output: int, cost: float) -> None:
        try:
            priced = price_of(model) is not None
            with self._lock:
                if step is not None:
                    tokens, usd = self._usage.get(step.index, (0, 0.0))
                    self._usage[step.index] = (tokens + total_input + output, usd + cost)
                if total_input and self._last_chars:
                    self._chars_per_token = max(1.0, self._last_chars / total_input)
                first_unpriced = self.state.response(model, total_input + output, cost, priced)
            if first_unpriced:
                text = (f"looptrace guard: model {model!r} has no price (records/pricing.py, set_price): "
                        f"max_usd={self.guard.max_usd:g} cannot count its calls' cost, which is unknown, not $0")
                log.warning("%s (run %s)", text, self.run.run_id)
                target = step.span if step is not None and step.span.is_recording() else self.run.span
                target.add_event(UNPRICED_EVENT, {"rule": "max_usd", "model": model, "message": text})
        except Exception:  # noqa: BLE001 - the guard never breaks the agent
            log.debug("looptrace: guard could not count a response", exc_info=True)

    # -- the decision -----------------------------------------------------------------------------

    def before_call(self, step: Step | None, request: Mapping[str, Any], provider: str) -> Mapping[str, Any]:
        """The request to send: ``request`` itself, or with a reflection turn. Raises ``GuardTripped``."""
        try:
            finding = self._check(step, request)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: guard check failed; the call goes ahead", exc_info=True)
            return request
        if finding is None:
            return request
        try:
            self._record(step, finding)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: could not record a guard finding", exc_info=True)
        if finding.action == "warn":
            return request
        if finding.action == "reflect":
            try:
                return with_reflection(request, self.state.reflection(finding), provider)
            except Exception:  # noqa: BLE001 - a request we cannot extend is sent as it was
                log.debug("looptrace: could not add the reflection turn", exc_info=True)
                return request
        self._stop(step, finding)
        raise GuardTripped(finding)

    def _check(self, step: Step | None, request: Mapping[str, Any]) -> Finding | None:
        current = step.index if step is not None else self.run.n_steps + 1
        with self._lock:
            for index in sorted(set(self._calls) | set(self._usage)):
                if self.state.observed < index < current:
                    calls = self._calls.pop(index, {})
                    usage = self._usage.pop(index, None)
                    acts = step_acts(index, [calls[i] for i in sorted(calls)], self.state.thresholds,
                                     *(usage or (None, None)))
                    self.state.observe(index, acts)
            tokens_estimate = None
            if self.guard.max_context_tokens is not None:
                self._last_chars = len(to_json(request))
                tokens_estimate = int(self._last_chars / self._chars_per_token)
            return self.state.check(tokens_estimate)

    def _record(self, step: Step | None, finding: Finding) -> None:
        data = finding.as_dict()
        attrs = {k: v for k, v in data.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
        attrs["steps"] = ",".join(map(str, finding.steps))
        attrs["evidence"] = to_json(finding.evidence)
        # A refused request that would have been a step of its own (an instrumentor's call, callstep.py)
        # makes no step: the stop is the run's, recorded on the run with the status and reason it ends with.
        refused = finding.action == "stop" and step is not None and not step.owns_span
        if step is None or refused or (step.owns_span and not step.span.is_recording()):
            self.run.span.add_event(GUARD_EVENT, attrs)
        else:
            step.record_event(GUARD_EVENT, attrs)
        (log.info if finding.action == "reflect" else log.warning)("%s [%s, run %s]", finding.message,
                                                                  finding.action, finding.run_id)

    def _stop(self, step: Step | None, finding: Finding) -> None:
        try:
            if step is not None:
                step.end()
            self.run.finish(finding.status, error=finding.message)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: could not store a stopped run", exc_info=True)


def with_reflection(request: Mapping[str, Any], text: str, provider: str) -> dict[str, Any]:
    """``request`` with one more user turn saying ``text``; the caller's request is not changed.

    Anthropic: a text block after the last user turn's tool results (the loop's own form). OpenAI Chat
    Completions: a user message after the tool messages. OpenAI Responses: a user input item.
    """
    out = dict(request)
    if "messages" in out:
        messages = list(out["messages"] or [])
        last = messages[-1] if messages else None
        if provider == "anthropic" and isinstance(last, Mapping) and last.get("role") == "user":
            content = last.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
            messages[-1] = {**last, "content": [*blocks, {"type": "text", "text": text}]}
        else:
            messages.append({"role": "user", "content": text})
        out["messages"] = messages
    elif "input" in out:
        given = out["input"]
        items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])
        out["input"] = [*items, {"role": "user", "content": text}]
    else:
        raise ValueError("a request with neither messages nor input")
    return out
