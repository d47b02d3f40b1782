"""How a run ended, on evidence only: ``ok``, ``error`` or ``incomplete``, and which evidence decided.

``ok`` used to be what the analyzer said when no failure rule fired, so a run it could not read (no
steps, a log cut off mid-action, a crash in the last message) "ended normally". Now each of the
three needs something the run recorded, and the diagnosis says what (``decided_by``) and how sure
it is (``confidence``: ``high``, or ``medium`` when one piece of evidence is missing or disagrees):

- ``ok``: a normal end marker (``Submitted``, ``###STOP###``, ``TERMINATE``, ``FINAL ANSWER:``, ...,
  markers.py); or a call of an end tool (``final_answer``, ``submit``, ``finish``, ...:
  ``markers.END_TOOLS``) as the run's last action, answer included, whether or not its result was
  recorded; or a status the source itself calls success (importers set ``ok`` only on a final
  answer, a submit action or the source's own success status; a trace's root span that ended) with
  a last step that is not an action still waiting for its result. A call left without a result
  does not by itself prove a cut log when the source recorded success AND a final answer: a missing
  field lowers the confidence (``medium``) instead of flipping the verdict.
- ``error``: the source's status says so (``error``, ``tool_error``), or a crash is written in the
  run's error, its last step, or a message (not a tool call's result) among its last ``TAIL_STEPS``
  steps, whichever agent wrote it (a traceback,
  ``SomeError: ...``, an agent runtime's "Error processing publish message"), and no normal end is
  recorded after it. The evidence is the error line and its step.
- ``incomplete``: no end is recorded: the run has no steps, its status says it never ended (a trace
  without its root, a group chat whose source recorded no end), or its log stops in the middle of an
  action (a tool call with no result).

Runs whose status is a cap, an overflow or a stall (``STATUS_MARKERS``) ended for that reason: the
failure rules explain them, and this module says nothing. Pure functions over ``RunView``.
"""

from __future__ import annotations

import json
from itertools import takewhile

from .markers import ERROR_MARKERS, EXCEPTION_LINE, STATUS_MARKERS, TAIL_STEPS, find_markers, is_end_tool
from .views import Diagnosis, RunView, StepView

__all__ = ["END_LABELS", "ERROR_STATUSES", "run_end", "crash_text", "end_call", "normal_end"]

END_LABELS = ("ok", "error", "incomplete")
ERROR_STATUSES = frozenset({"error", "tool_error"})
_TEXT = 300  # characters of error text (and of an end tool's answer) kept as evidence


def crash_text(text: str | None) -> str | None:
    """The crash line of ``text`` (clipped), or None: the last ``Type: message`` exception line (what
    a traceback ends on, the cause), else the line of the first crash marker found."""
    if not text:
        return None
    found = None
    for found in EXCEPTION_LINE.compiled().finditer(text):
        pass  # the last one
    if found is None:
        found = min((m for rx in ERROR_MARKERS if (m := rx.compiled().search(text))), key=lambda m: m.start(),
                    default=None)
    if found is None:
        return None
    start = text.rfind("\n", 0, found.start()) + 1
    end = text.find("\n", found.end())
    return text[start:end if end >= 0 else len(text)].strip()[:_TEXT]


def _final(run: RunView) -> tuple[int | None, list[StepView]]:
    """The last step number and its calls (``run.steps`` are in order of step and call)."""
    if not run.steps:
        return None, []
    last = run.steps[-1].step
    final = list(takewhile(lambda s: s.step == last, reversed(run.steps)))
    return last, final[::-1]


def _waiting(final: list[StepView]) -> StepView | None:
    """A call of the last step that never got a result (no observation, no error): the log stops mid-action."""
    return next((s for s in final if s.tool is not None and s.observation_key is None and not s.is_error
                 and s.error_type is None and not is_end_tool(s.tool)), None)


def end_call(run: RunView) -> StepView | None:
    """The run's last action, if it is a call of an end tool that did not fail (``run.steps`` are in
    order of step and call, as ``load_runs`` gives them)."""
    last = next((s for s in reversed(run.steps) if s.tool is not None), None)
    return last if last is not None and is_end_tool(last.tool) and not last.is_error else None


def _crash(run: RunView, last: int | None) -> tuple[str, int | None] | None:
    """(the crash line, its step): from the run's error, else the latest of its last steps that holds one."""
    text = crash_text(run.error)
    if text:
        return text, last
    if last is None:
        return None
    for s in reversed(run.steps):
        if s.step <= last - TAIL_STEPS:
            break
        # Before the last step, a tool call's failure is one the agent saw and went on from: only
        # messages (an agent's, the runtime's) can say the run crashed there.
        if s.step < last and s.tool is not None:
            continue
        if (text := crash_text(s.end_text)) is not None:
            return text, s.step
    return None


def normal_end(run: RunView, since: int | None = None) -> tuple[str, dict[str, object]] | None:
    """(what, evidence) of a normal end recorded at or after step ``since`` (anywhere when None): an
    end marker (in the run's status, answer or attributes, which speak for the run's end, or in a
    step from ``since`` on), or an end tool called as the last action."""
    if since is None:
        marker = run.marked("ok")
    else:
        texts = [(w, t) for w, t in run.end_texts()
                 if w in ("answer", "attributes") or (w.startswith("step ") and int(w[5:]) >= since)]
        marker = next((m for m in find_markers(texts, run.status) if m.label == "ok"), None)
    if marker is not None:
        return (f"{marker.text!r}, {marker.format}, in {marker.where}",
                {"marker": marker.text, "format": marker.format, "where": marker.where, "decided_by": "end marker"})
    call = end_call(run)
    if call is not None and (since is None or call.step >= since):
        answer = _answer(call) or run.answer
        return (f"step {call.step} called the end tool {call.tool!r}",
                {"end_tool": call.tool, "step": call.step, "answer": answer[:_TEXT] if answer else None,
                 "decided_by": "end tool"})
    return None


def _answer(call: StepView) -> str | None:
    """The answer an end tool was given: its one argument, or its ``answer``/``result``-like argument."""
    try:
        args = json.loads(call.args) if call.args else None
    except ValueError:
        return call.args
    if isinstance(args, dict):
        for key in ("answer", "final_answer", "result", "output", "text", "message", "content"):
            if isinstance(args.get(key), str):
                return args[key]
        values = [v for v in args.values() if v is not None]
        return (values[0] if isinstance(values[0], str) else json.dumps(values[0])) if len(values) == 1 else None
    if isinstance(args, list) and len(args) == 1:
        return args[0] if isinstance(args[0], str) else json.dumps(args[0])
    return args if isinstance(args, str) else None


def _span(run: RunView) -> tuple[int, int]:
    steps = [s.step for s in run.steps]
    return min(steps), max(steps)


def run_end(run: RunView) -> Diagnosis | None:
    """``ok``, ``error`` or ``incomplete`` with its evidence; None when the status is a cap, an overflow
    or a stall (the failure rules say why the run stopped)."""
    last, final = _final(run)
    if run.status in STATUS_MARKERS:
        return None
    crash = _crash(run, last)
    if run.status in ERROR_STATUSES or (crash and normal_end(run, since=crash[1]) is None):
        text, where = crash if crash else ((run.error or "")[:_TEXT] or None, last)
        return Diagnosis("error", where, where,
                         f"The run ended on an error{f' at step {where}' if where is not None else ''}"
                         + (f": {text}" if text else f" (status {run.status!r}).")
                         + ("" if not text or text.endswith(".") else "."),
                         {"status": run.status, "error": text, "step": where, "confidence": "high",
                          "decided_by": "error status" if run.status in ERROR_STATUSES and not crash else "crash text"})
    if not run.steps:
        return Diagnosis("incomplete", None, None, "The run recorded no steps: there is no evidence of how it ended.",
                         {"status": run.status, "reason": "no steps", "confidence": "high", "decided_by": "no steps"})
    first, last_step = _span(run)
    normal = normal_end(run)
    if normal is not None:
        what, evidence = normal
        return Diagnosis("ok", first, last_step, f"The run ended normally ({what}).",
                         {**evidence, "confidence": "high"})
    waiting = _waiting(final)
    if run.status == "ok" and waiting is None:
        return Diagnosis("ok", first, last_step, "The run ended normally (its source recorded success).",
                         {"status": run.status, "step": last, "confidence": "high", "decided_by": "status"})
    if waiting is not None and run.status == "ok" and run.answer:
        return Diagnosis("ok", first, last_step,
                         f"The run ended normally: its source recorded success and a final answer, though step "
                         f"{last} called {waiting.tool!r} and no result was recorded (a missing field lowers the "
                         "confidence, it does not make the log cut).",
                         {"status": run.status, "step": last, "tool": waiting.tool, "confidence": "medium",
                          "decided_by": "status and final answer"})
    if waiting is not None:
        return Diagnosis("incomplete", last, last,
                         f"The log stops in the middle of an action: step {last} called {waiting.tool!r} "
                         "and no result was recorded.",
                         {"status": run.status, "reason": "stops mid-action", "step": last, "tool": waiting.tool,
                          "confidence": "medium" if run.status == "ok" else "high",
                          "decided_by": "unanswered last call"})
    if run.status == "interrupted":  # a recorded end, though not a normal one: a user or a signal stopped it
        return Diagnosis("incomplete", last, last,
                         f"The run was interrupted (a user or a signal stopped it) after step {last}.",
                         {"status": run.status, "reason": "interrupted", "step": last, "confidence": "high",
                          "decided_by": "interrupted status"})
    return Diagnosis("incomplete", last, last,
                     f"No end was recorded (status {run.status!r}) and no end marker was found.",
                     {"status": run.status, "reason": "no end recorded", "step": last, "confidence": "high",
                      "decided_by": "no end recorded"})
