"""The failure rules: pure functions from a run's plain data to diagnoses with evidence.

Each rule looks at one failure mode and returns a ``Diagnosis`` (or None) naming the steps that
prove it: stagnation.py, context.py, and the cap and hallucination rules here. ``diagnose`` runs them
all and picks the primary one: the root cause, so a run that loops until its cap is primarily
``stagnation`` with ``cap_hit`` secondary. Every rule reads evidence the run recorded (statuses, error
types, end markers, observations); none looks at a source, a file path or an agent's name.
"""

from __future__ import annotations

from typing import Any

from .context import context_bomb
from .ending import END_LABELS, normal_end, run_end
from .guarded import guarded_thresholds
from .stagnation import stagnation
from .thresholds import DEFAULT_THRESHOLDS, Thresholds
from .views import Diagnosis, RunView, StepView

__all__ = ["StepView", "RunView", "Diagnosis", "diagnose", "rank", "RULES", "FAILURE_LABELS", "may_cap", "LABELS",
           "HALLUCINATION_ERRORS", "stagnation", "context_bomb", "cap_hit", "hallucinated_tool", "chat_limit",
           "LIMIT_ATTRIBUTES"]

LABELS = ("stagnation", "context_bomb", "cap_hit", "hallucinated_tool", *END_LABELS)
HALLUCINATION_ERRORS = frozenset({"tool_not_found", "invalid_arguments", "unparseable"})
_ABNORMAL = frozenset({"error", "interrupted", "incomplete", "tool_error"})


# -- caps and hallucinations ----------------------------------------------------------------------


# Where a chat log records the round or message limit it ran with (read when a file keeps it).
LIMIT_ATTRIBUTES = ("max_round", "max_rounds", "max_turns", "max_messages")


def chat_limit(run: RunView, t: Thresholds) -> tuple[str, int, int] | None:
    """(where the limit comes from, the limit, the count that reached it) for a run that recorded no
    end (no success status, no end marker, no end tool) and stopped at a round or message limit: one
    the run records (``LIMIT_ATTRIBUTES``), or ``t.chat_round_limit`` matched exactly by its message
    count (``messages`` attribute) or its number of turns."""
    if not run.steps or run.status == "ok" or normal_end(run) is not None:
        return None
    attrs = run.attribute_values
    turns = len({s.step for s in run.steps})
    messages = attrs.get("messages")
    counts = [c for c in (messages if isinstance(messages, int) else None, turns) if c is not None]
    for key in LIMIT_ATTRIBUTES:
        limit = attrs.get(key)
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 and max(counts) >= limit:
            return f"the run's {key}", limit, max(counts)
    if t.chat_round_limit > 0 and t.chat_round_limit in counts:
        return "the configured chat_round_limit", t.chat_round_limit, t.chat_round_limit
    return None


def cap_hit(run: RunView, t: Thresholds) -> Diagnosis | None:
    """A recorded cap: the run's status (``max_iters``, ``budget_exceeded``) or a framework's end marker;
    or a chat that recorded no end and stopped at its round limit (``chat_limit``). Never the step
    count alone: a long run that stopped by itself did not hit a cap."""
    marker = run.marked("cap_hit")
    if marker is None:
        limit = chat_limit(run, t)
        if limit is None:
            return None
        where, n, count = limit
        steps = [s.step for s in run.steps]
        return Diagnosis(
            "cap_hit", min(steps), max(steps),
            f"The chat stopped at its limit of {n} messages ({where}; {count} recorded) without a termination "
            "word, a final answer or a success status.",
            {"cap": n, "where": where, "count": count, "format": "chat round limit"},
        )
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


def may_cap(run: RunView, t: Thresholds) -> bool:
    """The column form of ``cap_hit`` without its end markers: False only when ``chat_limit`` cannot
    fire (the run succeeded, or neither it nor ``t`` names a round limit). ``run`` needs no steps."""
    return run.status != "ok" and (t.chat_round_limit > 0 or any(k in run.attribute_values for k in LIMIT_ATTRIBUTES))


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
FAILURE_LABELS = frozenset(rule.__name__ for rule in RULES)
"""The labels of ``RULES`` (each rule is named for its label): an end marker with one makes that rule fire."""

# Root cause first: an overflow that ended the run, then the loop behaviours that make caps fire,
# then the cap itself, then how the run ended (ending.py: ok, error or incomplete, each on evidence).
# A context that grew large without overflowing is a risk, not what stopped the run: on a run that
# ended normally ``ok`` stays primary with the risk as a secondary diagnosis. A cap marker in the
# final message outranks a forced final answer in the same message (cap_hit before ok).
# A short streak of failing calls the run ended in (stagnation:failing, below the stagnation
# thresholds) explains a run that ended without a recorded reason, not one a framework says it
# stopped for a cap, for bad tool calls or on a crash. A loop the agent got out of is not why the run
# ended: it ranks after every end (stagnation:recovered).
_PRIORITY = ("context_bomb:fatal", "stagnation", "hallucinated_tool", "cap_hit", "error", "stagnation:failing",
             "ok", "incomplete", "stagnation:recovered", "context_bomb")
# Secondary diagnoses worth listing under a failure: a crash is; "ok" and "incomplete" add nothing.
_QUIET = frozenset({"ok", "incomplete"})


def _key(d: Diagnosis) -> str:
    if d.label == "context_bomb" and d.evidence.get("kind") == "overflow":
        return "context_bomb:fatal"
    if d.label == "stagnation" and d.evidence.get("kind") == "failing":
        return "stagnation:failing"
    return d.label


def _recovered(d: Diagnosis, ended_normally: bool) -> bool:
    """The agent got out of the loop: it acted differently afterwards (``ends_run`` false), and either
    the run then ended normally, or the loop was only a short streak of failing calls (below the
    stagnation thresholds: ``fail_repeat_min``). A long loop in a run a cap stopped is why it was stopped."""
    if d.label != "stagnation" or d.evidence.get("ends_run", True):
        return False
    return d.evidence.get("kind") == "failing" or ended_normally


def diagnose(run: RunView, t: Thresholds = DEFAULT_THRESHOLDS, *,
             cleared: frozenset[str] = frozenset()) -> list[Diagnosis]:
    """All diagnoses of ``run``, the primary first. Every run gets one: a failure rule's, or how it
    ended (``ok`` only on evidence of a normal end, else ``error`` or ``incomplete``). A loop the
    agent recovered from is listed after how the run ended, as a secondary finding. ``cleared``
    names failure labels the column screen proved no rule can give this run (screen.py): their
    rules are not evaluated, which changes nothing but the time."""
    t = guarded_thresholds(run, t)  # a guarded run: the guard's thresholds too (guarded.py)
    return rank([d for rule in RULES if rule.__name__ not in cleared and (d := rule(run, t)) is not None],
                run_end(run))


def rank(found: list[Diagnosis], end: Diagnosis | None) -> list[Diagnosis]:
    """The failure rules' diagnoses and how the run ended, as ``diagnose`` returns them: the primary
    first, then the secondary ones worth listing. A run the column screen cleared of every failure
    rule (screen.py) is ``rank([], run_end(run))``."""
    if end is not None:
        if end.label == "ok" and not found:
            end = _with(end, explanation=end.explanation + " No failure pattern was found.")
        found.append(end)
    if not found:
        return []
    ended_normally = end is not None and end.label == "ok" and not any(
        _key(d) in ("cap_hit", "context_bomb:fatal", "hallucinated_tool") for d in found)
    found.sort(key=lambda d: _PRIORITY.index("stagnation:recovered" if _recovered(d, ended_normally) else _key(d)))
    return [_with(found[0], is_primary=True), *(d for d in found[1:] if d.label not in _QUIET)]


def _with(d: Diagnosis, **changes: Any) -> Diagnosis:
    """``dataclasses.replace`` for a Diagnosis at a third of its cost (every run is ranked, twice):
    the same fields, ``changes`` over them; no field is left out, whatever fields Diagnosis gains."""
    new = object.__new__(Diagnosis)
    new.__dict__.update(d.__dict__, **changes)
    return new
