"""Stagnation: the agent repeats itself AND learns nothing from it.

Repetition alone is not being stuck. Paging through a file (``scroll_down`` eleven times) or polling a
job that advances repeats one action while each result is new: that is progress. So every check here
pairs "the same action" (``looptrace.tracer.records.actions``, the one identity) with "the same
outcome": the observation up to clock readings, durations and ids (``progress_key``), or for a long
observation up to the values of its numbers too (``near_observation_key``: a file view whose only
change is its line count), and whether it failed. An outcome already seen in the streak is no
progress; the streak is stuck when enough of its calls brought none.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import eq, ne

from .thresholds import Thresholds
from .views import Diagnosis, RunView, StepView, describe_action

__all__ = ["stagnation", "stalled_streak"]


def _actions(run: RunView) -> list[StepView]:
    return [s for s in run.steps if s.tool is not None]


# The three checks read each action's identity and outcome many times over; they are taken once per
# run into plain lists (the profile of a 100k-step analysis had most of its time in attribute reads
# and ``outcome`` calls repeated per check).
Outcome = tuple[str | None, bool]


def _outcomes(actions: Sequence[StepView], near_min_bytes: int) -> list[Outcome]:
    """``StepView.outcome`` of each action, inlined."""
    return [((a.near_key if a.near_key is not None and a.observation_bytes >= near_min_bytes else a.observation_key),
             a.is_error) for a in actions]


def stalled_streak(actions: Sequence[StepView], near_min_bytes: int) -> tuple[int, int, int]:
    """(start, length, stalled) of the streak of one repeated action with the most calls that brought
    nothing new; ``stalled`` counts its first call plus every call whose outcome was already seen."""
    return _stalled([a.action for a in actions], _outcomes(actions, near_min_bytes))


def _streaks(keys: Sequence[object]) -> list[int]:
    """Where each stretch of equal consecutive keys starts, and ``len(keys)`` (compared in C, not a
    Python loop: this runs over every action of every run)."""
    n = len(keys)
    return [0, *compress(range(1, n), map(ne, keys[1:], keys)), n] if n else [0]


def _stalled(acts: Sequence[str | None], outs: Sequence[Outcome]) -> tuple[int, int, int]:
    best = (0, 0, 0)
    bounds = _streaks(acts)
    for start, end in zip(bounds, bounds[1:]):
        length = end - start
        stalled = 1 if length == 1 else length - len(set(outs[start:end])) + 1
        if stalled > best[2]:
            best = (start, length, stalled)
    return best


def _longest_cycle(acts: Sequence[str | None], outs: Sequence[Outcome], max_period: int) -> tuple[int, int, int]:
    """(start, length, period) of the longest stretch where each action and its outcome equal those
    ``period`` actions earlier, for a cycle of at least two distinct actions: "edit, test, edit, test"
    with changing results is work, the same two greps with the same answers is not."""
    best = (0, 0, 0)
    keys = list(zip(acts, outs))
    for period in range(2, max_period + 1):
        same = list(map(eq, keys[period:], keys))  # same[j]: keys[j + period] == keys[j]
        if True not in same:
            continue
        run_start = None
        for i in range(period, len(keys) + 1):
            matches = i < len(keys) and same[i - period]
            if matches and run_start is None:
                run_start = i - period
            if not matches and run_start is not None:
                length = i - run_start
                if length > best[1] and len({k[0] for k in keys[run_start:run_start + period]}) >= 2:
                    best = (run_start, length, period)
                run_start = None
    return best


def _same_observations(actions: Sequence[StepView], acts: Sequence[str | None], outs: Sequence[Outcome],
                       t: Thresholds) -> tuple[int, int, int] | None:
    """Consecutive different actions that all got the same (non-trivial, non-error) answer."""
    best: tuple[int, int, int] | None = None
    bounds = _streaks([o[0] for o in outs])
    for start, i in zip(bounds, bounds[1:]):
        count = i - start
        if count < t.same_observation_min:
            continue
        a = actions[start]
        if (a.observation_key and not a.is_error and a.observation_bytes >= t.same_observation_min_bytes
                and len(set(acts[start:i])) > 1 and (best is None or count > best[2])):
            best = (start, i - 1, count)
    return best


def stagnation(run: RunView, t: Thresholds) -> Diagnosis | None:
    actions = _actions(run)
    acts, outs = [a.action for a in actions], _outcomes(actions, t.near_same_min_bytes)
    start, length, stalled = _stalled(acts, outs)
    if stalled >= t.repeat_min:
        a = actions[start]
        new = length - stalled + 1
        return Diagnosis(
            "stagnation", a.step, actions[start + length - 1].step,
            f"{describe_action(a)} ran {length} times in a row"
            + (" with the same result each time." if new == 1 else f"; only {new} results were new."),
            {"kind": "repeat", "repeats": length, "no_progress": stalled, "tool": a.tool, "args": a.args},
        )
    start, length, period = _longest_cycle(acts, outs, t.cycle_max_period)
    if period and length >= period * t.cycle_repeats:
        cycle = actions[start:start + period]
        return Diagnosis(
            "stagnation", actions[start].step, actions[start + length - 1].step,
            f"A cycle of {period} actions ({'; '.join(describe_action(a) for a in cycle)}) repeated "
            f"{length // period} times with the same results.",
            {"kind": "cycle", "period": period, "repeats": length // period, "tools": [a.tool for a in cycle],
             "args": [a.args for a in cycle]},
        )
    same = _same_observations(actions, acts, outs, t)
    if same is not None:
        first, last, count = same
        return Diagnosis(
            "stagnation", actions[first].step, actions[last].step,
            f"{count} actions in a row returned the same observation, from {describe_action(actions[first])} "
            f"to {describe_action(actions[last])}: no new information.",
            {"kind": "same_observation", "repeats": count,
             "tools": sorted({str(a.tool) for a in actions[first:last + 1]})},
        )
    marker = run.marked("stagnation")
    if marker is not None:
        last_step = run.steps[-1].step if run.steps else None
        return Diagnosis("stagnation", last_step, last_step,
                         f"The agent's framework stopped it as stuck in a loop ({marker.text!r}, {marker.where}).",
                         {"kind": "marker", "marker": marker.text, "format": marker.format})
    return None
