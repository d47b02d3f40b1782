"""How a run ended, on evidence only: ``ok``, ``error`` or ``incomplete``.

``ok`` used to be what the analyzer said when no failure rule fired, so a run it could not read (no
steps, a log cut off mid-action, a crash in the last message) "ended normally". Now each of the
three needs something the run recorded:

- ``ok``: a normal end marker (``Submitted``, ``###STOP###``, ``TERMINATE``, ``FINAL ANSWER:``, ...,
  markers.py), or a status the source itself calls success (importers set ``ok`` only on a final
  answer, a submit action or the source's own success status; a trace's root span that ended) with
  a last step that is not an action still waiting for its result.
- ``error``: the source's status says so (``error``, ``tool_error``), or a crash is written in the
  run's error or in its very last step (a traceback, ``SomeError: ...``) and no normal end marker is
  present. The evidence is the error text and the step.
- ``incomplete``: no end is recorded: the run has no steps, its status says it never ended (a trace
  without its root), or its log stops in the middle of an action (a tool call with no result).

Runs whose status is a cap, an overflow or a stall (``STATUS_MARKERS``) ended for that reason: the
failure rules explain them, and this module says nothing. Pure functions over ``RunView``.
"""

from __future__ import annotations

from .markers import ERROR_MARKERS, STATUS_MARKERS
from .views import Diagnosis, RunView, StepView

__all__ = ["END_LABELS", "ERROR_STATUSES", "run_end", "crash_text"]

END_LABELS = ("ok", "error", "incomplete")
ERROR_STATUSES = frozenset({"error", "tool_error"})
_TEXT = 300  # characters of error text kept as evidence


def crash_text(text: str | None) -> str | None:
    """The line around the first crash marker in ``text`` (clipped), or None."""
    if not text:
        return None
    for m in ERROR_MARKERS:
        found = m.compiled().search(text)
        if found:
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.end())
            line = text[start:end if end >= 0 else len(text)].strip()
            return line[:_TEXT]
    return None


def _final(run: RunView) -> tuple[int | None, list[StepView]]:
    if not run.steps:
        return None, []
    last = max(s.step for s in run.steps)
    return last, [s for s in run.steps if s.step == last]


def _waiting(final: list[StepView]) -> StepView | None:
    """A call of the last step that never got a result (no observation, no error): the log stops mid-action."""
    return next((s for s in final if s.tool is not None and s.observation_key is None and not s.is_error
                 and s.error_type is None), None)


def run_end(run: RunView) -> Diagnosis | None:
    """``ok``, ``error`` or ``incomplete`` with its evidence; None when the status is a cap, an overflow
    or a stall (the failure rules say why the run stopped)."""
    last, final = _final(run)
    if run.status in STATUS_MARKERS:
        return None
    crash = crash_text(run.error) or next((t for s in final if (t := crash_text(s.end_text))), None)
    normal = run.marked("ok")
    if run.status in ERROR_STATUSES or (crash and normal is None):
        text = crash or (run.error or "")[:_TEXT] or None
        return Diagnosis("error", last, last,
                         f"The run ended on an error{f' at step {last}' if last is not None else ''}"
                         + (f": {text}" if text else f" (status {run.status!r}).")
                         + ("" if not text or text.endswith(".") else "."),
                         {"status": run.status, "error": text, "step": last})
    if not run.steps:
        return Diagnosis("incomplete", None, None, "The run recorded no steps: there is no evidence of how it ended.",
                         {"status": run.status, "reason": "no steps"})
    if normal is not None:
        return Diagnosis("ok", min(s.step for s in run.steps), last,
                         f"The run ended normally ({normal.text!r}, {normal.format}, in {normal.where}).",
                         {"marker": normal.text, "format": normal.format, "where": normal.where})
    waiting = _waiting(final)
    if run.status == "ok" and waiting is None:
        return Diagnosis("ok", min(s.step for s in run.steps), last,
                         "The run ended normally (its source recorded success).",
                         {"status": run.status, "step": last})
    if waiting is not None:
        return Diagnosis("incomplete", last, last,
                         f"The log stops in the middle of an action: step {last} called {waiting.tool!r} "
                         "and no result was recorded.",
                         {"status": run.status, "reason": "stops mid-action", "step": last, "tool": waiting.tool})
    return Diagnosis("incomplete", last, last,
                     f"No end was recorded (status {run.status!r}) and no end marker was found.",
                     {"status": run.status, "reason": "no end recorded", "step": last})
