"""The failure rules: pure functions from a run's plain data to diagnoses with evidence.

Each rule looks at one failure mode and returns a ``Diagnosis`` (or None) naming the steps that
prove it: stagnation.py, context.py, and the cap and hallucination rules here. ``diagnose`` runs them
all and picks the primary one: the root cause, so a run that loops until its cap is primarily
``stagnation`` with ``cap_hit`` secondary. Every rule reads evidence the run recorded (statuses, error
types, end markers, observations); none looks at a source, a file path or an agent's name.
"""

from __future__ import annotations

from dataclasses import replace

from .context import context_bomb
from .ending import END_LABELS, run_end
from .guarded import guarded_thresholds
from .stagnation import stagnation
from .thresholds import DEFAULT_THRESHOLDS, Thresholds
from .views import Diagnosis, RunView, StepView

__all__ = ["StepView", "RunView", "Diagnosis", "diagnose", "RULES", "LABELS", "HALLUCINATION_ERRORS",
           "stagnation", "context_bomb", "cap_hit", "hallucinated_tool"]

LABELS = ("stagnation", "context_bomb", "cap_hit", "hallucinated_tool", *END_LABELS)
HALLUCINATION_ERRORS = frozenset({"tool_not_found", "invalid_arguments", "unparseable"})
_ABNORMAL = frozenset({"error", "interrupted", "incomplete", "tool_error"})


# -- caps and hallucinations ----------------------------------------------------------------------


def cap_hit(run: RunView, t: Thresholds) -> Diagnosis | None:
    """A recorded cap: the run's status (``max_iters``, ``budget_exceeded``) or a framework's end marker.
    Never the step count alone: a long run that stopped by itself did not hit a cap."""
    marker = run.marked("cap_hit")
    if marker is None:
        return None
    actions = [s for s in run.steps if s.tool is not None]
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
    cap = {"max_iters": "its step cap", "budget_exceeded": "its budget cap"}.get(
        marker.text if marker.where == "status" else "", f"a limit ({marker.text!r}, {marker.format})")
    steps = [s.step for s in run.steps]
    return Diagnosis(
        "cap_hit", min(steps, default=None), max(steps, default=None),
        f"The run hit {cap}. Of {len(actions)} actions, {productive} were new, {repeated} repeated "
        f"earlier ones and {errors} failed.",
        {"cap": marker.text, "format": marker.format, "where": marker.where, "actions": len(actions),
         "productive": productive, "repeated": repeated, "error_recovery": errors},
    )


def hallucinated_tool(run: RunView, t: Thresholds) -> Diagnosis | None:
    """Evidence that tools do not exist or actions cannot be parsed: the error types every importer and
    the tracer record (``tool_not_found``, ``invalid_arguments``, ``unparseable``), or a framework's end
    marker saying format errors ended the run."""
    actions = [s for s in run.steps if s.tool is not None or s.error_type in HALLUCINATION_ERRORS]
    bad = [s for s in actions if s.error_type in HALLUCINATION_ERRORS]
    marker = run.marked("hallucinated_tool")
    if not bad and marker is None:
        return None
    share = len(bad) / len(actions) if actions else 0.0
    # It ended the run only when the run failed right after it (a cap that fires is what ended a capped run).
    ends_run = marker is not None or (run.status in _ABNORMAL and actions[-1].error_type in HALLUCINATION_ERRORS)
    if not (ends_run or (len(bad) >= t.hallucination_min and share >= t.hallucination_share)):
        return None
    kinds = sorted({str(s.error_type) for s in bad})
    tools = sorted({str(s.tool) for s in bad if s.tool})[:10]
    unknown = sorted({str(s.tool) for s in bad if s.tool and s.error_type == "tool_not_found"})
    last = run.steps[-1].step if run.steps else None
    ending = f"; the run ended on it ({marker.text!r})." if marker else "; one of them ended the run." if ends_run else "."
    return Diagnosis(
        "hallucinated_tool", bad[0].step if bad else last, bad[-1].step if bad else last,
        f"{len(bad)} of {len(actions)} actions ({share:.0%}) called tools that do not exist"
        + (f" ({', '.join(unknown[:3])})" if unknown else "") + ", broke a tool's schema or could not be parsed" + ending,
        {"count": len(bad), "share": round(share, 3), "kinds": kinds, "tools": tools, "ends_run": ends_run,
         "steps": [s.step for s in bad][:50], **({"marker": marker.text, "format": marker.format} if marker else {})},
    )


RULES = (stagnation, context_bomb, cap_hit, hallucinated_tool)

# Root cause first: an overflow that ended the run, then the loop behaviours that make caps fire,
# then the cap itself, then how the run ended (ending.py: ok, error or incomplete, each on evidence).
# A context that grew large without overflowing is a risk, not what stopped the run: on a run that
# ended normally ``ok`` stays primary with the risk as a secondary diagnosis. A cap marker in the
# final message outranks a forced final answer in the same message (cap_hit before ok).
# A loop the agent got out of is not why the run ended: it ranks after every end (stagnation:recovered).
_PRIORITY = ("context_bomb:fatal", "stagnation", "hallucinated_tool", "cap_hit", "error", "ok", "incomplete",
             "stagnation:recovered", "context_bomb")
# Secondary diagnoses worth listing under a failure: a crash is; "ok" and "incomplete" add nothing.
_QUIET = frozenset({"ok", "incomplete"})


def _rank(d: Diagnosis, end: Diagnosis | None) -> int:
    key = "context_bomb:fatal" if d.label == "context_bomb" and d.evidence.get("kind") == "overflow" else d.label
    if d.label == "stagnation" and _recovered(d, end):
        key = "stagnation:recovered"
    return _PRIORITY.index(key)


def _recovered(d: Diagnosis, end: Diagnosis | None) -> bool:
    """The agent got out of the loop: the run went on after it and either ended normally, or the loop
    was only a short streak of failing calls (``fail_repeat_min``, below the stagnation thresholds)."""
    if d.evidence.get("ends_run", True):
        return False
    return d.evidence.get("kind") == "failing" or (end is not None and end.label == "ok")


def diagnose(run: RunView, t: Thresholds = DEFAULT_THRESHOLDS) -> list[Diagnosis]:
    """All diagnoses of ``run``, the primary first. Every run gets one: a failure rule's, or how it
    ended (``ok`` only on evidence of a normal end, else ``error`` or ``incomplete``). A loop the
    agent recovered from is listed after how the run ended, as a secondary finding."""
    t = guarded_thresholds(run, t)  # a guarded run: the guard's thresholds too (guarded.py)
    found = [d for rule in RULES if (d := rule(run, t)) is not None]
    end = run_end(run)
    if end is not None:
        if end.label == "ok" and not found:
            end = replace(end, explanation=end.explanation + " No failure pattern was found.")
        found.append(end)
    if not found:
        return []
    found.sort(key=lambda d: _rank(d, end))
    return [replace(found[0], is_primary=True), *(d for d in found[1:] if d.label not in _QUIET)]
