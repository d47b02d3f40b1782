"""Plan-and-execute: one planner call writes a numbered plan, each step runs as its own ReAct run.

Each step's run sees the task, its own step and the answers of the steps before it, never their
transcripts: a step's context stays small however long the plan. With ``replan``, a re-planner call
after each step sees the results so far and returns the steps still to do; an answer with no
numbered list ("DONE") ends the plan early. There is no synthesis call: the answer is the last
executed step's answer, so the plan's last step should produce it.
"""

from __future__ import annotations

from collections.abc import Sequence

from looptrace.tracer import Run
from looptrace.tracer.spans.conversation import response_text

from ..agent import Agent
from ..result import RunResult, Stop
from ._common import Tally, model_step, numbered, parse_plan, request, run_strategy

__all__ = [
    "PLANNER_SYSTEM",
    "PLAN_PREFIX",
    "REPLAN_PREFIX",
    "STEP_STRATEGY",
    "STRATEGY",
    "parse_plan",
    "plan_and_execute",
    "plan_prompt",
    "replan_prompt",
    "step_task",
]

STRATEGY = "plan_execute"
STEP_STRATEGY = "plan_step"
PLAN_PREFIX = "Plan the task: "
REPLAN_PREFIX = "Revise the remaining plan: "
PLANNER_SYSTEM = (
    "You plan work for an agent that has tools. Answer with a short numbered list (1., 2., ...) of "
    "concrete steps, one per line, and nothing else. The last step must produce the final answer. "
    "When revising a plan, list only the steps still to do, or answer DONE if the task is finished."
)

Done = Sequence[tuple[str, str]]
"""Executed steps so far: (step text, its answer)."""


def plan_prompt(task: str) -> str:
    return f"{PLAN_PREFIX}{task}"


def _results(done: Done) -> str:
    return "\n".join(f"{i}. {step} -> {answer}" for i, (step, answer) in enumerate(done, 1))


def replan_prompt(task: str, done: Done, remaining: Sequence[str]) -> str:
    return (f"{REPLAN_PREFIX}{task}\n\nDone so far:\n{_results(done)}\n\n"
            f"Remaining plan:\n{numbered(remaining) or '(none)'}")


def step_task(task: str, index: int, step: str, done: Done) -> str:
    """The task text of plan step ``index`` (1-based), with the earlier steps' answers as context."""
    text = f"Step {index} of the plan for: {task}\n{step}"
    return f"{text}\n\nResults of earlier steps:\n{_results(done)}" if done else text


def plan_and_execute(agent: Agent, task: str, *, replan: bool = False, max_steps: int = 8) -> RunResult:
    """Plan ``task`` with one model call, then run each step as a child ReAct run of ``agent``.

    Stops with ``max_iters`` when a plan (or revised plan) has more than ``max_steps`` steps in all,
    before running the step over the cap; with the failed step's status when a step does not finish.
    """
    if max_steps < 1:
        raise ValueError("max_steps must be at least 1")

    def body(run: Run, tally: Tally) -> Stop:
        reply = model_step(run, agent, request(agent, PLANNER_SYSTEM, plan_prompt(task)), tally)
        remaining = parse_plan(response_text(reply))
        if not remaining:
            return Stop("error", "the planner's answer has no numbered steps")
        done: list[tuple[str, str]] = []
        while remaining:
            if len(done) + len(remaining) > max_steps:
                return Stop("max_iters", f"the plan has {len(done) + len(remaining)} steps, more than "
                                         f"max_steps={max_steps}")
            step = remaining.pop(0)
            index = len(done) + 1
            child = agent.run(step_task(task, index, step, done), parent=run, strategy=STEP_STRATEGY)
            tally.add(child)
            if not child.ok:
                return Stop(child.status, f"plan step {index} stopped with {child.status}: {child.error}")
            done.append((step, child.answer or ""))
            if replan:
                reply = model_step(run, agent, request(agent, PLANNER_SYSTEM,
                                                       replan_prompt(task, done, remaining)), tally)
                remaining = parse_plan(response_text(reply))
        return Stop("ok", answer=done[-1][1])

    return run_strategy(agent, task, STRATEGY, body)
