"""A run a live guard was held to is judged by the guard's thresholds too, so the two agree on it.

``Guard(max_repeats=3)`` stops an agent on its third identical call, where the analyzer's default
``repeat_min`` is 5; the run records the thresholds its guard applied (``looptrace.run.guard``,
spans/guarding.py), and the repeat rules take, for that run, the lower of the two wherever the guard
set one. A guard never makes the analyzer less sensitive: a higher guard threshold leaves the default.
"""

from __future__ import annotations

from dataclasses import replace

from looptrace.tracer.rules import Thresholds

from .views import RunView, _attributes

__all__ = ["guarded_thresholds"]

_REPEAT_THRESHOLDS = ("repeat_min", "fail_repeat_min", "cycle_repeats", "same_observation_min")


def guarded_thresholds(run: RunView, t: Thresholds) -> Thresholds:
    guard = _attributes(run.attributes).get("guard")
    recorded = guard.get("thresholds") if isinstance(guard, dict) else None
    if not isinstance(recorded, dict):
        return t
    lower = {}
    for name in _REPEAT_THRESHOLDS:
        value, own = recorded.get(name), getattr(t, name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 2 and (own < 2 or value < own):
            lower[name] = value
    return replace(t, **lower) if lower else t
