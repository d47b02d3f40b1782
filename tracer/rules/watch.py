"""The repeat rules one call at a time: what a live guard (and the loop's own stop) feeds as it goes.

``RepeatWatch.add`` takes the call just made and returns a ``Finding`` the moment a streak reaches
its threshold, once per streak; ``findings`` lists every streak found so far at its full length. The
definitions are those of ``repeats.py`` (its docstring says each rule); this module only keeps, per
rule, the state of the streak still open, so each call costs a few comparisons whatever the run's
length. Fed a run's calls in order, a watch finds exactly the findings ``repeat_findings`` finds on
the whole run (tests/test_rules.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from .findings import RULES, Act, Finding, finding
from .repeats import _fails_on, _informative
from .thresholds import DEFAULT_THRESHOLDS, Thresholds

__all__ = ["RepeatWatch"]


@dataclass
class _Streak:
    rule: str
    start: int
    calls: int
    tripped_at: int
    period: int = 1
    no_progress: int = 0


class RepeatWatch:
    """Incremental evaluation of the repeat rules over one run's calls.

    ``add`` the calls in the order they were made, each with its step number, action key and outcome
    key (``findings.outcome_key`` of what came back), whether it failed, and, once per step, the
    step's tokens and cost. Not thread-safe: one watch per run, fed by one thread.
    """

    def __init__(self, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> None:
        self.thresholds = thresholds
        self._acts: list[Act] = []
        self._found: list[_Streak] = []
        # repeat: where the open streak of one action starts, the outcomes it saw, its stalled count
        self._r_start, self._r_seen, self._r_stalled = 0, set[tuple[str | None, bool]](), 0
        self._r: _Streak | None = None
        self._f_start: int | None = None  # failing
        self._f: _Streak | None = None
        periods = range(2, thresholds.cycle_max_period + 1)
        self._c_start: dict[int, int | None] = dict.fromkeys(periods)  # cycle, per period
        self._c_ok: dict[int, bool] = dict.fromkeys(periods, False)
        self._c: dict[int, _Streak | None] = dict.fromkeys(periods)
        self._s_start = 0  # same observation
        self._s: _Streak | None = None
        self._s_other_at: int | None = None

    def add(self, step: int, action: str | None, outcome: str | None = None, is_error: bool = False,
            tokens: int | None = None, cost_usd: float | None = None, *, tool: str | None = None,
            size: int = 0) -> Finding | None:
        """Record one call; the finding whose streak this call brought to its threshold, if any (when
        several do at once, the first of ``findings.RULES``)."""
        return self.add_act(Act(step, action, outcome, is_error, tool, tokens, cost_usd, size))

    def add_act(self, act: Act) -> Finding | None:
        i = len(self._acts)
        self._acts.append(act)
        tripped = [s for s in (self._repeat(i, act), *self._cycles(i, act), self._failing(i, act),
                               self._same(i, act)) if s is not None]
        self._found.extend(tripped)
        return self._finding(tripped[0], tripped[0].calls) if tripped else None

    @property
    def findings(self) -> list[Finding]:
        """Every streak found so far, at its length now, ordered as ``repeat_findings`` orders them."""
        return sorted((self._finding(s, s.calls) for s in self._found),
                      key=lambda f: (f.tripped_at, RULES.index(f.rule), f.start))

    def current(self) -> Finding | None:
        """The finding whose streak is still going (it includes the latest call), if any."""
        n = len(self._acts)
        live = [s for s in self._found if s.start + s.calls == n]
        live.sort(key=lambda s: RULES.index(s.rule))
        return self._finding(live[0], live[0].calls) if live else None

    def _finding(self, s: _Streak, calls: int) -> Finding:
        return finding(s.rule, self._acts, s.start, calls, s.tripped_at, period=s.period, no_progress=s.no_progress)

    # -- one rule each: extend the open streak or start a new one; return a streak that just tripped --

    def _repeat(self, i: int, a: Act) -> _Streak | None:
        t, key = self.thresholds, (a.outcome, a.is_error)
        if i and a.action is not None and a.action == self._acts[i - 1].action:
            if key in self._r_seen:
                self._r_stalled += 1
            self._r_seen.add(key)
            if self._r is not None:
                self._r.calls, self._r.no_progress = i - self._r_start + 1, self._r_stalled
            elif self._r_stalled == t.repeat_min and t.repeat_min >= 2:
                self._r = _Streak("repeat", self._r_start, i - self._r_start + 1, a.step,
                                  no_progress=self._r_stalled)
                return self._r
            return None
        self._r_start, self._r_seen, self._r_stalled, self._r = i, {key}, 1, None
        return None

    def _failing(self, i: int, a: Act) -> _Streak | None:
        n = self.thresholds.fail_repeat_min
        if self._f_start is not None and _fails_on(self._acts[i - 1], a):
            calls = i - self._f_start + 1
            if self._f is not None:
                self._f.calls = calls
            elif calls == n and n >= 2:
                self._f = _Streak("failing", self._f_start, calls, a.step)
                return self._f
            return None
        self._f_start = i if a.is_error and a.action is not None else None
        self._f = None
        return None

    def _cycles(self, i: int, a: Act) -> list[_Streak | None]:
        t, acts, out = self.thresholds, self._acts, []
        for p in self._c_start:
            before = acts[i - p] if i >= p else None
            if before is None or (a.action, a.outcome, a.is_error) != (before.action, before.outcome, before.is_error):
                self._c_start[p], self._c[p] = None, None
                out.append(None)
                continue
            start = self._c_start[p]
            if start is None:
                start = self._c_start[p] = i - p
                head = acts[start:i]
                self._c_ok[p] = len({h.action for h in head}) >= 2 and all(h.action is not None for h in head)
            length, streak = i - start + 1, self._c[p]
            if streak is not None:
                streak.calls = length
            elif self._c_ok[p] and t.cycle_repeats >= 2 and length == p * t.cycle_repeats:
                self._c[p] = streak = _Streak("cycle", start, length, a.step, period=p)
                out.append(streak)
                continue
            out.append(None)
        return out

    def _same(self, i: int, a: Act) -> _Streak | None:
        t = self.thresholds
        if i and a.outcome == self._acts[i - 1].outcome:
            first = self._acts[self._s_start]
            if self._s_other_at is None and a.action != first.action:
                self._s_other_at = i
            calls = i - self._s_start + 1
            if self._s is not None:
                self._s.calls = calls
            elif (t.same_observation_min >= 2 and calls >= t.same_observation_min and self._s_other_at is not None
                  and _informative(first, t)):
                self._s = _Streak("same_observation", self._s_start, calls, a.step)
                return self._s
            return None
        self._s_start, self._s_other_at, self._s = i, None, None
        return None
