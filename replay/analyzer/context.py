"""Context bombs: the prompt outgrew (or nearly outgrew) the model's window, and which step did it.

Two kinds of evidence. An overflow the provider or framework reported (status ``context_overflow`` or
an end marker) needs no window. Ratios ("90% of the window", "one result took 25% of it") need the
window: from the trace when it records one, else from the model-family table (windows.py), else from
a ``context_window`` threshold set by the user; with none of these the ratio rules stay silent rather
than guess. The evidence step is the one that pushed the prompt over: the step whose result entered
the prompt at the first step past the line, with the tokens it added and their share of the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from .thresholds import Thresholds
from .views import Diagnosis, RunView, StepView
from .windows import window_for

__all__ = ["context_bomb", "run_window", "pusher", "may_bomb", "sized_steps"]


_CONTEXT, _BYTES = attrgetter("context_tokens"), attrgetter("observation_bytes")


def sized_steps(run: RunView) -> list[StepView]:
    """The steps whose context was measured. An unknown size (NULL: a refused call, a source that
    records none, a step's second call) stays unknown: it is left out, never read as 0, which would
    fake a drop in the growth projection and hide a context nearing the window. A 0 is no
    measurement either (stores written before NULLs were kept recorded a refused call as 0)."""
    return [s for s in run.steps if s.context_tokens]


def run_window(run: RunView, t: Thresholds) -> int | None:
    return run.window or window_for(run.model) or (t.context_window if t.context_window > 0 else None)


def pusher(sized: Sequence[StepView], line: float) -> tuple[StepView, StepView | None] | None:
    """(the first step of ``sized`` (``sized_steps``) whose context reached ``line``, the measured step
    before it whose result pushed it there); None when the context never reached it."""
    for i, s in enumerate(sized):
        if s.context_tokens is not None and s.context_tokens >= line:
            return s, sized[i - 1] if i else None
    return None


def _push_evidence(steps: Sequence[StepView], crossed: StepView, before: StepView | None,
                   window: int | None) -> tuple[dict[str, Any], str]:
    """Evidence and a sentence naming the step that pushed the prompt to ``crossed``: what it added is
    the growth of the context between the two when both were measured, else its results' size."""
    if before is None:
        return ({"crossing_step": crossed.step},
                f"the prompt was already {crossed.context_tokens} tokens at step {crossed.step}")
    calls = [s for s in steps if s.step == before.step and s.tool is not None]
    tool = max(calls, key=lambda s: s.observation_bytes).tool if calls else None
    if crossed.context_tokens and before.context_tokens:
        added = crossed.context_tokens - before.context_tokens
    else:
        added = sum(s.observation_bytes for s in calls) // 4
    share = f", {added / window:.0%} of the window" if window else ""
    what = f"the result of {tool} at step {before.step}" if tool else f"step {before.step}"
    where = (f"bringing the prompt to {crossed.context_tokens} at step {crossed.step}" if crossed.context_tokens
             else f"before step {crossed.step}")
    return ({"crossing_step": crossed.step, "pushing_step": before.step, "pushing_tool": tool,
             "pushing_tokens": added, "pushing_share": round(added / window, 3) if window else None},
            f"{what} added {added} tokens{share}, {where}")


def _refused(run: RunView) -> tuple[StepView, StepView | None] | None:
    """(the step the provider refused: the last one, the step whose result went into it)."""
    if not run.steps:
        return None
    last = run.steps[-1]
    before = [s for s in run.steps if s.step < last.step and s.tool is not None]
    return last, (before[-1] if before else None)


def context_bomb(run: RunView, t: Thresholds) -> Diagnosis | None:
    window = run_window(run, t)
    sized = sized_steps(run)
    peak = max(sized, key=_CONTEXT, default=None)  # every sized step has a count
    evidence: dict[str, Any] = {"window_tokens": window}
    if peak is not None:
        evidence.update(peak_context_tokens=peak.context_tokens, peak_step=peak.step)
    projection = _overflow_projection(sized, window, t.growth_steps) if window else None
    if projection is not None:
        evidence["projected_overflow_step"] = projection
    last = run.steps[-1].step if run.steps else None
    marker = run.marked("context_bomb")
    if marker is not None:
        found = pusher(sized, window) if window else None
        if found is None:  # the window is unknown or not reached in what was measured: the last request
            found = _refused(run)
        detail = ""
        if found is not None:
            more, detail = _push_evidence(run.steps, *found, window)
            evidence.update(more)
            detail = "; " + detail
        first = evidence.get("pushing_step", evidence.get("crossing_step", last))
        return Diagnosis("context_bomb", first, last,
                         f"The prompt outgrew the context window ({marker.text!r}){detail}.",
                         {**evidence, "kind": "overflow", "marker": marker.text, "format": marker.format})
    if window is None:
        return None
    biggest = max(run.steps, key=_BYTES, default=None)
    if biggest is not None and biggest.observation_bytes // 4 >= t.observation_share * window:
        tokens = biggest.observation_bytes // 4
        return Diagnosis("context_bomb", biggest.step, biggest.step,
                         f"One result of {biggest.tool} at step {biggest.step} added about {tokens} tokens, "
                         f"{tokens / window:.0%} of the {window}-token window.",
                         {**evidence, "kind": "observation", "pushing_step": biggest.step,
                          "pushing_tool": biggest.tool, "pushing_tokens": tokens,
                          "pushing_share": round(tokens / window, 3)})
    found = pusher(sized, t.context_near * window)
    if found is not None and peak is not None:
        more, detail = _push_evidence(run.steps, *found, window)
        first = more.get("pushing_step", found[0].step)
        return Diagnosis("context_bomb", first, peak.step,
                         f"The context reached {peak.context_tokens} tokens, "
                         f"{(peak.context_tokens or 0) / window:.0%} of the {window}-token window: {detail}.",
                         {**evidence, **more, "kind": "near_window"})
    return None


def may_bomb(run: RunView, max_bytes: int, max_context: int | None, t: Thresholds) -> bool:
    """The column form of ``context_bomb`` without its end markers: False only when neither ratio rule
    can fire on a run whose largest observation is ``max_bytes`` and largest non-zero context
    ``max_context`` (None: none measured). ``run`` needs no steps: the window is its model's or its
    attributes'."""
    window = run_window(run, t)
    if window is None:
        return False
    return max_bytes // 4 >= t.observation_share * window or (
        max_context is not None and max_context >= t.context_near * window)


def _overflow_projection(sized: Sequence[StepView], window: int, n: int) -> int | None:
    """The step at which the context would reach the window at its growth over the last ``n`` measured
    steps (the growth per step between the first and last of them: steps of unknown size in between
    count as steps, never as a size)."""
    recent = [(s.step, s.context_tokens) for s in sized if s.context_tokens][-n:]
    if len(recent) < 2:
        return None
    (first_step, first), (last_step, last) = recent[0], recent[-1]
    growth = (last - first) / max(1, last_step - first_step)
    if growth <= 0:
        return None
    return last_step + int((window - last) / growth) + 1
