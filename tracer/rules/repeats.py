"""The repeat rules over a whole run at once: every streak that reached its threshold.

Repetition alone is not being stuck. Paging through a file (``scroll_down`` eleven times) or polling a
job that advances repeats one action while each result is new: that is progress. So every rule pairs
"the same action" with "the same outcome" (``Act.outcome``, ``findings.outcome_key``):

- ``repeat``: one action again and again; its first call plus every call whose outcome was already
  seen in the streak count as no progress, and ``repeat_min`` of them trip it.
- ``failing``: the same tool failing ``fail_repeat_min`` times in a row with the same error, whether
  its arguments changed or not (a tool that keeps refusing is no progress, whatever changes in its
  error text's clock readings or line numbers: the outcome key masks them).
- ``cycle``: a stretch where each action and its outcome equal those ``period`` (2..``cycle_max_period``)
  actions earlier, over at least two distinct actions, ``cycle_repeats`` times round. "edit, test,
  edit, test" with changing results is work; the same two greps with the same answers is not.
- ``same_observation``: ``same_observation_min`` different actions in a row that all got the same
  answer (not an error, at least ``same_observation_min_bytes`` long): no new information.

``watch.RepeatWatch`` evaluates the same definitions one call at a time and finds the same streaks
(tests/test_rules.py proves it on table-driven runs and on every run of the shared corpus). Here the
comparisons run over whole lists (``map``/``compress`` in C): this runs over every action of every run
a store holds. Pure functions over plain data.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import eq, ne

from .findings import Act, Finding, finding
from .thresholds import Thresholds

__all__ = ["repeat_findings", "repeats", "failing", "cycles", "same_observations"]


def _bounds(keys: Sequence[object]) -> list[int]:
    """Where each stretch of equal consecutive keys starts, and ``len(keys)``."""
    n = len(keys)
    return [0, *compress(range(1, n), map(ne, keys[1:], keys)), n] if n else [0]


def repeats(acts: Sequence[Act], t: Thresholds) -> list[Finding]:
    if t.repeat_min < 2:
        return []
    out = []
    bounds = _bounds([a.action for a in acts])
    k = t.repeat_min
    for start, end in [(s, e) for s, e in zip(bounds, bounds[1:]) if e - s >= k]:
        if acts[start].action is None:
            continue
        seen: set[tuple[str | None, bool]] = set()
        stalled, tripped = 0, None
        for i in range(start, end):
            key = (acts[i].outcome, acts[i].is_error)
            if i == start or key in seen:
                stalled += 1
                if stalled == t.repeat_min:
                    tripped = acts[i].step
            seen.add(key)
        if tripped is not None:
            out.append(finding("repeat", acts, start, end - start, tripped, no_progress=stalled))
    return out


def _fails_on(prev: Act, a: Act) -> bool:
    """``a`` carries on a failing streak that reached ``prev``: the same tool failed again with the
    same error (an error with no text: the same call failed again). A different error is news, even
    from the same call: a script whose exit code changes each run is doing something."""
    return (a.is_error and a.action is not None and a.tool == prev.tool and a.outcome == prev.outcome
            and (a.outcome is not None or a.action == prev.action))


def failing(acts: Sequence[Act], t: Thresholds) -> list[Finding]:
    if t.fail_repeat_min < 2:
        return []
    out = []
    n = len(acts)
    # Most calls succeed: only a failed call can start a streak (looked up in C, not a Python loop).
    starts = list(compress(range(n), [a.is_error for a in acts]))
    i = 0
    for s in starts:
        if s < i or acts[s].action is None:
            continue
        i = s
        j = i + 1
        while j < n and _fails_on(acts[j - 1], acts[j]):
            j += 1
        if j - i >= t.fail_repeat_min:
            out.append(finding("failing", acts, i, j - i, acts[i + t.fail_repeat_min - 1].step))
        i = j
    return out


def cycles(acts: Sequence[Act], t: Thresholds) -> list[Finding]:
    """Every stretch that repeats a cycle of at least two distinct actions ``cycle_repeats`` times."""
    if t.cycle_repeats < 2:
        return []
    out = []
    keys = [(a.action, a.outcome, a.is_error) for a in acts]
    for period in range(2, t.cycle_max_period + 1):
        need = period * t.cycle_repeats
        same = map(eq, keys[period:], keys)  # same[j]: keys[j + period] == keys[j]
        hits = list(compress(range(len(keys) - period), same))
        # Runs of consecutive j with same[j]: each is a stretch acts[j .. k + period - 1].
        breaks = [0, *compress(range(1, len(hits)), map(ne, hits[1:], map((1).__add__, hits))), len(hits)]
        for first, last in zip(breaks, breaks[1:]):
            if first == last:
                continue
            start, length = hits[first], hits[last - 1] - hits[first] + 1 + period
            head = acts[start:start + period]
            if length >= need and len({a.action for a in head}) >= 2 and all(a.action is not None for a in head):
                out.append(finding("cycle", acts, start, length, acts[start + need - 1].step, period=period))
    return out


def same_observations(acts: Sequence[Act], t: Thresholds) -> list[Finding]:
    """Consecutive actions, not all the same, whose (non-trivial, non-error) answers were the same."""
    if t.same_observation_min < 2:
        return []
    out = []
    bounds = _bounds([a.outcome for a in acts])
    k = t.same_observation_min
    for start, end in [(s, e) for s, e in zip(bounds, bounds[1:]) if e - s >= k]:
        if not _informative(acts[start], t):
            continue
        first = acts[start].action
        # Trips where the count is reached and a second distinct action has been seen.
        other = next((i for i in range(start + 1, end) if acts[i].action != first), None)
        if other is None:
            continue
        at = max(other, start + t.same_observation_min - 1)
        out.append(finding("same_observation", acts, start, end - start, acts[at].step))
    return out


def _informative(a: Act, t: Thresholds) -> bool:
    return (a.outcome is not None and a.action is not None and not a.is_error
            and a.size >= t.same_observation_min_bytes)


def repeat_findings(acts: Sequence[Act], t: Thresholds) -> list[Finding]:
    """Every streak in ``acts`` that reached its threshold, ordered by the step it tripped at (then by
    rule, ``findings.RULES``): the findings a ``RepeatWatch`` fed the same acts returns in turn."""
    order = {"repeat": 0, "cycle": 1, "failing": 2, "same_observation": 3}
    found = [*repeats(acts, t), *cycles(acts, t), *failing(acts, t), *same_observations(acts, t)]
    return sorted(found, key=lambda f: (f.tripped_at, order[f.rule], f.start))
