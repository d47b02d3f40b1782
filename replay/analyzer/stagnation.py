"""Stagnation: the agent repeats itself AND learns nothing from it.

The repeat rules themselves (the same action with no new outcome, the same tool failing again, a
cycle, different actions with one answer) are defined once in the rules layer
(``looptrace.tracer.rules``), where the loop's own stop and a live guard evaluate them too. This
module turns a run's calls into the rules' plain ``Act`` values, picks the finding to report and
writes its evidence: the steps, their tokens and cost, and whether the run ended in the streak (no
action after it: ``ends_run``) or the agent went on (``rules.diagnose`` makes a loop the agent
recovered from a secondary finding).
"""

from __future__ import annotations

from collections.abc import Sequence

from looptrace.tracer.rules import Act, Finding, Thresholds, repeat_findings

from .views import Diagnosis, RunView, StepView, describe_action

__all__ = ["stagnation", "acts_of"]


def _actions(run: RunView) -> list[StepView]:
    return [s for s in run.steps if s.tool is not None]


def acts_of(actions: Sequence[StepView], near_min_bytes: int) -> list[Act]:
    """Each call as the rules read it: action key, outcome key (near-same when the observation is at
    least ``near_min_bytes`` long, as ``rules.outcome_key`` decides), failure, tool, spend, size."""
    # tuple.__new__ skips the NamedTuple's Python-level __new__: this runs once per action of every run.
    new = tuple.__new__
    return [new(Act, (a.step, a.action,
                      a.near_key if a.near_key is not None and a.observation_bytes >= near_min_bytes
                      else a.observation_key, a.is_error, a.tool, a.tokens, a.cost_usd, a.observation_bytes))
            for a in actions]


def _pick(found: list[Finding], rule: str) -> Finding | None:
    own = [f for f in found if f.rule == rule]
    if rule == "repeat":
        return max(own, key=lambda f: (f.no_progress, -f.start), default=None)
    if rule == "cycle":
        return max(own, key=lambda f: (f.calls, -f.period, -f.start), default=None)
    return max(own, key=lambda f: (f.calls, -f.start), default=None)


def _spend(f: Finding, ends_run: bool) -> dict[str, object]:
    return {"steps": list(f.steps), "calls": f.calls, "tokens": f.tokens, "cost_usd": f.cost_usd,
            "ends_run": ends_run, "tripped_at": f.tripped_at}


def _tail(f: Finding, ends_run: bool) -> str:
    """The end of the explanation: what the streak cost, and whether the agent got out of it."""
    spend = [f"{f.tokens:,} tokens" if f.tokens is not None else "",
             f"${f.cost_usd:.4f}" if f.cost_usd is not None else ""]
    money = " and ".join(p for p in spend if p)
    return "." + (f" {money} went on it." if money else "") + ("" if ends_run else " The agent recovered.")


def stagnation(run: RunView, t: Thresholds) -> Diagnosis | None:
    actions = _actions(run)
    found = repeat_findings(acts_of(actions, t.near_same_min_bytes), t)
    f = _pick(found, "repeat")
    if f is not None:
        a, ends = actions[f.start], f.start + f.calls == len(actions)
        new = f.calls - f.no_progress + 1
        return Diagnosis(
            "stagnation", f.first_step, f.last_step,
            f"{describe_action(a)} ran {f.calls} times in a row"
            + (" with the same result each time" if new == 1 else f"; only {new} results were new") + _tail(f, ends),
            {"kind": "repeat", "repeats": f.calls, "no_progress": f.no_progress, "tool": a.tool, "args": a.args,
             **_spend(f, ends)},
        )
    f = _pick(found, "cycle")
    if f is not None:
        cycle, ends = actions[f.start:f.start + f.period], f.start + f.calls == len(actions)
        return Diagnosis(
            "stagnation", f.first_step, f.last_step,
            f"A cycle of {f.period} actions ({'; '.join(describe_action(a) for a in cycle)}) repeated "
            f"{f.calls // f.period} times with the same results" + _tail(f, ends),
            {"kind": "cycle", "period": f.period, "repeats": f.calls // f.period, "tools": [a.tool for a in cycle],
             "args": [a.args for a in cycle], **_spend(f, ends)},
        )
    f = _pick(found, "same_observation")
    if f is not None:
        first, final, ends = actions[f.start], actions[f.start + f.calls - 1], f.start + f.calls == len(actions)
        return Diagnosis(
            "stagnation", f.first_step, f.last_step,
            f"{f.calls} actions in a row returned the same observation, from {describe_action(first)} "
            f"to {describe_action(final)}: no new information" + _tail(f, ends),
            {"kind": "same_observation", "repeats": f.calls,
             "tools": sorted({str(a.tool) for a in actions[f.start:f.start + f.calls]}), **_spend(f, ends)},
        )
    failing = [g for g in found if g.rule == "failing"]
    if failing:
        # The streak the run ended in, else the longest: the one a user must look at first.
        f = max(failing, key=lambda g: (g.start + g.calls == len(actions), g.calls, -g.start))
        a, ends = actions[f.start], f.start + f.calls == len(actions)
        same_args = len({x.action for x in actions[f.start:f.start + f.calls]}) == 1
        return Diagnosis(
            "stagnation", f.first_step, f.last_step,
            f"{f.calls} {'identical ' if same_args else ''}failing calls of {a.tool!r} at "
            f"{'step ' + str(f.first_step) if f.first_step == f.last_step else f'steps {f.first_step}-{f.last_step}'}"
            f" ({describe_action(a)}{'' if same_args else ', ...'})" + _tail(f, ends),
            {"kind": "failing", "repeats": f.calls, "tool": a.tool, "args": a.args, "same_args": same_args,
             **_spend(f, ends)},
        )
    marker = run.marked("stagnation")
    if marker is not None:
        last_step = run.steps[-1].step if run.steps else None
        return Diagnosis("stagnation", last_step, last_step,
                         f"The agent's framework stopped it as stuck in a loop ({marker.text!r}, {marker.where}).",
                         {"kind": "marker", "marker": marker.text, "format": marker.format, "ends_run": True})
    return None
