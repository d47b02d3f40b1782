"""The failure rules: pure functions from a run's plain data to diagnoses with evidence.

Each rule looks at one failure mode and returns a ``Diagnosis`` (or None) naming the steps that
prove it. ``diagnose`` runs them all and picks the primary one: the root cause, so a run that loops
until its cap is primarily ``stagnation`` with ``cap_hit`` secondary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from looptrace.tracer.records.actions import call_key

from .thresholds import DEFAULT_THRESHOLDS, Thresholds, window_for

__all__ = ["StepView", "RunView", "Diagnosis", "diagnose", "RULES", "LABELS", "HALLUCINATION_ERRORS"]

LABELS = ("stagnation", "context_bomb", "cap_hit", "hallucinated_tool", "ok")
HALLUCINATION_ERRORS = frozenset({"tool_not_found", "invalid_arguments", "unparseable"})
CAP_STATUSES = frozenset({"max_iters", "budget_exceeded"})
_OVERFLOW_TEXT = re.compile(r"prompt is too long|context[ _-]?(length|window)|maximum context|too many tokens", re.I)


@dataclass(frozen=True)
class StepView:
    """One action (a tool call) of a step; a step with no tool call has ``tool`` None."""

    step: int
    tool: str | None = None
    args: str | None = None  # JSON text
    observation_key: str | None = None  # a hash of the observation: equal keys, equal observations
    observation_bytes: int = 0
    is_error: bool = False
    error_type: str | None = None
    context_tokens: int | None = None
    call_index: int = 0
    action_key: str | None = None  # the store's key for this call (records/actions.py)

    @property
    def action(self) -> str | None:
        """Equal for the same tool with the same arguments, as everywhere in looptrace."""
        if self.tool is None:
            return None
        return self.action_key if self.action_key is not None else call_key(self.tool, self.args)


@dataclass(frozen=True)
class RunView:
    run_id: str
    status: str
    steps: tuple[StepView, ...]
    model: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Diagnosis:
    label: str
    first_step: int | None
    last_step: int | None
    explanation: str
    evidence: dict[str, Any] = field(default_factory=dict)
    is_primary: bool = False


# -- stagnation -----------------------------------------------------------------------------------


def _actions(run: RunView) -> list[StepView]:
    return [s for s in run.steps if s.tool is not None]


def _longest_repeat(actions: Sequence[StepView]) -> tuple[int, int]:
    """(start index, length) of the longest run of identical consecutive actions."""
    best, start = (0, 0), 0
    for i in range(1, len(actions) + 1):
        if i == len(actions) or actions[i].action != actions[start].action:
            if i - start > best[1]:
                best = (start, i - start)
            start = i
    return best


def _longest_cycle(actions: Sequence[StepView], max_period: int) -> tuple[int, int, int]:
    """(start, length, period) of the longest stretch where each action and its observation equal
    those ``period`` actions earlier, for a cycle of at least two distinct actions. Requiring the
    observations to repeat too keeps "edit, test, edit, test" with changing results out."""
    best = (0, 0, 0)
    keys = [(a.action, a.observation_key) for a in actions]
    for period in range(2, max_period + 1):
        run_start = None
        for i in range(period, len(keys) + 1):
            matches = i < len(keys) and keys[i] == keys[i - period]
            if matches and run_start is None:
                run_start = i - period
            if not matches and run_start is not None:
                length = i - run_start
                if length > best[1] and len({k[0] for k in keys[run_start:run_start + period]}) >= 2:
                    best = (run_start, length, period)
                run_start = None
    return best


def stagnation(run: RunView, t: Thresholds) -> Diagnosis | None:
    actions = _actions(run)
    start, length = _longest_repeat(actions)
    if length >= t.repeat_min:
        a = actions[start]
        return Diagnosis(
            "stagnation", a.step, actions[start + length - 1].step,
            f"The same action was repeated {length} times in a row: {a.tool} with the same arguments.",
            {"kind": "repeat", "repeats": length, "tool": a.tool, "args": a.args},
        )
    start, length, period = _longest_cycle(actions, t.cycle_max_period)
    if period and length >= period * t.cycle_repeats:
        cycle = actions[start:start + period]
        return Diagnosis(
            "stagnation", actions[start].step, actions[start + length - 1].step,
            f"A cycle of {period} actions ({', '.join(str(a.tool) for a in cycle)}) repeated "
            f"{length // period} times.",
            {"kind": "cycle", "period": period, "repeats": length // period, "tools": [a.tool for a in cycle]},
        )
    same = _same_observations(actions, t)
    if same is not None:
        first, last, count = same
        return Diagnosis(
            "stagnation", actions[first].step, actions[last].step,
            f"{count} actions in a row returned the same observation: no new information.",
            {"kind": "same_observation", "repeats": count,
             "tools": sorted({str(a.tool) for a in actions[first:last + 1]})},
        )
    return None


def _same_observations(actions: Sequence[StepView], t: Thresholds) -> tuple[int, int, int] | None:
    best: tuple[int, int, int] | None = None
    start = 0
    for i in range(1, len(actions) + 1):
        a = actions[start]
        if i < len(actions) and actions[i].observation_key == a.observation_key:
            continue
        count = i - start
        distinct_actions = len({x.action for x in actions[start:i]})
        if (count >= t.same_observation_min and a.observation_key and not a.is_error
                and a.observation_bytes >= t.same_observation_min_bytes and distinct_actions > 1
                and (best is None or count > best[2])):
            best = (start, i - 1, count)
        start = i
    return best


# -- context bomb ---------------------------------------------------------------------------------


def context_bomb(run: RunView, t: Thresholds) -> Diagnosis | None:
    window = window_for(run.model, t.context_window)
    sized = [s for s in run.steps if s.context_tokens]
    peak = max(sized, key=lambda s: s.context_tokens or 0, default=None)
    biggest = max(run.steps, key=lambda s: s.observation_bytes, default=None)
    evidence: dict[str, Any] = {"window_tokens": window}
    if peak is not None:
        evidence.update(peak_context_tokens=peak.context_tokens, peak_step=peak.step)
    if biggest is not None and biggest.observation_bytes:
        evidence.update(largest_observation_step=biggest.step, largest_observation_tool=biggest.tool,
                        largest_observation_tokens=biggest.observation_bytes // 4)
    projection = _overflow_projection(sized, window, t.growth_steps)
    if projection is not None:
        evidence["projected_overflow_step"] = projection
    last = run.steps[-1].step if run.steps else None
    if run.status == "context_overflow" or (run.error and _OVERFLOW_TEXT.search(run.error)):
        return Diagnosis("context_bomb", peak.step if peak else last, last,
                         "The prompt outgrew the model's context window and the provider refused it.",
                         {**evidence, "kind": "overflow"})
    if biggest is not None and biggest.observation_bytes // 4 >= t.observation_share * window:
        return Diagnosis("context_bomb", biggest.step, biggest.step,
                         f"One result of {biggest.tool} added about {biggest.observation_bytes // 4} tokens, "
                         f"{biggest.observation_bytes / 4 / window:.0%} of the window.",
                         {**evidence, "kind": "observation"})
    if peak is not None and (peak.context_tokens or 0) >= t.context_near * window:
        first = next(s for s in sized if (s.context_tokens or 0) >= t.context_near * window)
        return Diagnosis("context_bomb", first.step, peak.step,
                         f"The context reached {peak.context_tokens} tokens, "
                         f"{(peak.context_tokens or 0) / window:.0%} of the {window}-token window.",
                         {**evidence, "kind": "near_window"})
    return None


def _overflow_projection(sized: Sequence[StepView], window: int, n: int) -> int | None:
    """The step at which the context would reach the window at its recent growth rate."""
    recent = sized[-n:]
    if len(recent) < 2:
        return None
    steps = recent[-1].step - recent[0].step
    growth = ((recent[-1].context_tokens or 0) - (recent[0].context_tokens or 0)) / max(1, steps)
    if growth <= 0:
        return None
    return recent[-1].step + int((window - (recent[-1].context_tokens or 0)) / growth) + 1


# -- caps and hallucinations ----------------------------------------------------------------------


def cap_hit(run: RunView, t: Thresholds) -> Diagnosis | None:
    if run.status not in CAP_STATUSES:
        return None
    actions = _actions(run)
    seen: set[str | None] = set()
    repeated = errors = productive = 0
    for a in actions:
        if a.is_error:
            errors += 1
        elif a.action in seen:
            repeated += 1
        else:
            productive += 1
        seen.add(a.action)
    cap = "step" if run.status == "max_iters" else "budget"
    steps = [s.step for s in run.steps]
    return Diagnosis(
        "cap_hit", min(steps, default=None), max(steps, default=None),
        f"The run hit its {cap} cap. Of {len(actions)} actions, {productive} were new, {repeated} repeated "
        f"earlier ones and {errors} failed.",
        {"cap": run.status, "actions": len(actions), "productive": productive, "repeated": repeated,
         "error_recovery": errors},
    )


def hallucinated_tool(run: RunView, t: Thresholds) -> Diagnosis | None:
    actions = [s for s in run.steps if s.tool is not None or s.error_type in HALLUCINATION_ERRORS]
    bad = [s for s in actions if s.error_type in HALLUCINATION_ERRORS]
    if not bad:
        return None
    share = len(bad) / len(actions)
    # It ended the run only when the run failed right after it (a cap that fires is what ended a capped run).
    ends_run = run.status == "error" and actions[-1].error_type in HALLUCINATION_ERRORS
    if not (ends_run or (len(bad) >= t.hallucination_min and share >= t.hallucination_share)):
        return None
    kinds = sorted({str(s.error_type) for s in bad})
    tools = sorted({str(s.tool) for s in bad if s.tool})[:10]
    return Diagnosis(
        "hallucinated_tool", bad[0].step, bad[-1].step,
        f"{len(bad)} of {len(actions)} actions ({share:.0%}) called tools that do not exist, broke a tool's "
        f"schema or could not be parsed" + ("; one of them ended the run." if ends_run else "."),
        {"count": len(bad), "share": round(share, 3), "kinds": kinds, "tools": tools, "ends_run": ends_run,
         "steps": [s.step for s in bad][:50]},
    )


RULES = (stagnation, context_bomb, cap_hit, hallucinated_tool)

# Root cause first: an overflow that ended the run, then the loop behaviours that make caps fire,
# then the cap itself. A context that grew large without overflowing is a risk, not what stopped
# the run: it ranks below the cap and stays as a secondary diagnosis with its evidence.
_PRIORITY = ("context_bomb:fatal", "stagnation", "hallucinated_tool", "cap_hit", "context_bomb", "ok")


def _rank(d: Diagnosis) -> int:
    key = "context_bomb:fatal" if d.label == "context_bomb" and d.evidence.get("kind") == "overflow" else d.label
    return _PRIORITY.index(key)


def diagnose(run: RunView, t: Thresholds = DEFAULT_THRESHOLDS) -> list[Diagnosis]:
    """All diagnoses of ``run``, the primary first. A run that ended normally with none gets ``ok``;
    one that ended abnormally with none gets no diagnosis (nothing here explains it)."""
    found = [d for rule in RULES if (d := rule(run, t)) is not None]
    if not found:
        if run.status != "ok":
            return []
        steps = [s.step for s in run.steps]
        found = [Diagnosis("ok", min(steps, default=None), max(steps, default=None),
                           "The run ended normally; no failure pattern was found.")]
    found.sort(key=_rank)
    return [replace(found[0], is_primary=True), *found[1:]]
