"""Reflexion: retry a task with lessons the model wrote about its own failed attempts.

The failure signal is the caller's ``check`` (run the tests, validate the output), not the model's
opinion of its answer: an attempt passes only when ``check`` says so. After a failed attempt, one
reflection call turns the answer and the check's feedback into a lesson, and every later attempt is
a fresh ReAct run whose task carries all lessons so far. Fresh runs, rather than one long
conversation, keep each attempt's context as small as the first one's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from looptrace.tracer import Run
from looptrace.tracer.spans.conversation import response_text

from ..agent import Agent
from ..result import RunResult, Stop
from ._common import Tally, model_step, request, run_strategy

__all__ = [
    "ATTEMPT_STRATEGY",
    "REFLECT_PREFIX",
    "REFLECT_SYSTEM",
    "STRATEGY",
    "Check",
    "attempt_task",
    "reflect_prompt",
    "reflexion",
]

STRATEGY = "reflexion"
ATTEMPT_STRATEGY = "attempt"
REFLECT_PREFIX = "Reflect on the failed attempt: "
REFLECT_SYSTEM = (
    "An agent attempted a task and failed the check. In two or three sentences, say what went wrong "
    "and what to do differently next time. Write it as advice to the next attempt."
)

Check = Callable[[str], tuple[bool, str]]
"""``check(answer) -> (passed, feedback)``: the failure signal, e.g. a test suite run on the answer."""


def attempt_task(task: str, lessons: Sequence[str]) -> str:
    if not lessons:
        return task
    # A lesson's own line breaks would split its bullet.
    bullets = "\n".join(f"- {' '.join(lesson.split())}" for lesson in lessons)
    return f"{task}\n\nLessons from earlier attempts:\n{bullets}"


def reflect_prompt(task: str, answer: str | None, feedback: str) -> str:
    return f"{REFLECT_PREFIX}{task}\n\nAnswer given:\n{answer or '(none)'}\n\nWhy it failed:\n{feedback}"


def reflexion(agent: Agent, task: str, check: Check, *, max_attempts: int = 3) -> RunResult:
    """Up to ``max_attempts`` child runs of ``task``; ``ok`` with the first answer that passes ``check``.

    An attempt that stops without an answer (caps, errors) fails with its status as the feedback.
    When every attempt fails the parent ends ``error``, its message listing each attempt's feedback.
    """

    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")

    def body(run: Run, tally: Tally) -> Stop:
        lessons: list[str] = []
        failures: list[str] = []
        for attempt in range(1, max_attempts + 1):
            child = tally.add(agent.run(attempt_task(task, lessons), parent=run, strategy=ATTEMPT_STRATEGY))
            if child.ok:
                passed, feedback = check(child.answer or "")
                if passed:
                    return Stop("ok", answer=child.answer)
            else:
                feedback = f"the attempt stopped with {child.status}: {child.error}"
            failures.append(f"attempt {attempt}: {feedback}")
            if attempt < max_attempts:
                reply = model_step(run, agent, request(agent, REFLECT_SYSTEM,
                                                       reflect_prompt(task, child.answer, feedback)), tally)
                tally.reflections += 1
                lessons.append(response_text(reply) or feedback)
        return Stop("error", f"all {max_attempts} attempts failed the check: " + "; ".join(failures))

    return run_strategy(agent, task, STRATEGY, body)
