"""What every strategy shares: the parent run, its own traced model calls, and the totals.

A strategy is a parent run whose children are ordinary ReAct runs of the worker ``Agent``. The
model calls a strategy makes itself (planning, reflecting, proposing, scoring) are steps of the
parent run, made with the same tracer API the loop uses, so the store prices them like any other
call. The parent's ``RunResult`` adds its own usage to its children's, so the caller sees what the
whole escalation cost; the store keeps each run's own usage, and a tree query sums them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from looptrace.tracer import Run, Step
from looptrace.tracer.spans.conversation import response_text
from looptrace.tracer.records.pricing import usage_of

from ..agent import Agent
from ..agent import ask as traced_call
from ..model import ModelError
from ..result import RunResult, Stop

__all__ = ["Tally", "ask", "model_step", "numbered", "parse_plan", "request", "run_strategy"]

# "1. x", "2) x", "3: x", "Step 4 - x", "**5.** x": a number, a separator, then the text.
_ITEM = re.compile(r"^\s*(?:\*\*)?(?:step\s+)?(\d+)(?:[.):]|\s+-)(?:\*\*)?\s+(\S.*)$", re.IGNORECASE)


def parse_plan(text: str) -> list[str]:
    """The items of the numbered list in ``text``, in order; ``[]`` when there is none ("DONE").

    Lines before the first item (a preamble) and unindented lines after an item are not part of it;
    indented lines continue the item above them.
    """
    items: list[str] = []
    for line in text.splitlines():
        match = _ITEM.match(line)
        if match:
            items.append(match.group(2).strip())
        elif items and line[:1].isspace() and line.strip():
            items[-1] = f"{items[-1]} {line.strip()}"
    return items


def numbered(items: Sequence[str]) -> str:
    return "\n".join(f"{i}. {item}" for i, item in enumerate(items, 1))


def request(agent: Agent, system: str, user: str) -> dict[str, Any]:
    """A one-turn Messages request to the worker's model, without tools."""
    return {"model": agent.model.name, "max_tokens": agent.policy.max_tokens, "system": system,
            "messages": [{"role": "user", "content": user}]}


@dataclass
class Tally:
    """Steps, tokens and cost of a parent run: its own model calls plus its children."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    reflections: int = 0
    children: list[RunResult] = field(default_factory=list)

    def charge(self, response: Mapping[str, Any]) -> None:
        usage = usage_of(response)
        self.input_tokens += usage.total_input
        self.output_tokens += usage.output_tokens
        self.cost_usd += usage.cost(self.model)

    def add(self, child: RunResult) -> RunResult:
        self.children.append(child)
        return child

    def result(self, run: Run, stop: Stop) -> RunResult:
        ok = stop.status == "ok"
        error = None if ok else stop.message
        run.finish(stop.status, answer=stop.answer, error=error)
        kids = self.children
        return RunResult(
            run.run_id, stop.status, stop.answer,
            run.n_steps + sum(c.steps for c in kids),
            self.input_tokens + sum(c.input_tokens for c in kids),
            self.output_tokens + sum(c.output_tokens for c in kids),
            self.cost_usd + sum(c.cost_usd for c in kids),
            error=error, reflections=self.reflections + sum(c.reflections for c in kids), children=list(kids),
        )


def ask(step: Step, agent: Agent, req: Mapping[str, Any], tally: Tally) -> dict[str, Any]:
    """One traced model call inside ``step``; its usage is charged to ``tally``."""
    response = traced_call(step, agent.model, req)
    tally.charge(response)
    text = response_text(response)
    if text:
        step.thought(text)
    return response


def model_step(parent: Run, agent: Agent, req: Mapping[str, Any], tally: Tally) -> dict[str, Any]:
    """A parent step that is just one model call."""
    with parent.step() as step:
        return ask(step, agent, req, tally)


def run_strategy(agent: Agent, task: str, strategy: str, body: Callable[[Run, Tally], Stop]) -> RunResult:
    """Open the parent run, let ``body`` drive it to a ``Stop``, and finish it with the totals.

    A model call of the strategy's own that fails for good ends the parent with that call's status.
    """
    with agent.tracing.run(agent.name, task=task, model=agent.model.name, strategy=strategy) as run:
        tally = Tally(agent.model.name)
        try:
            stop = body(run, tally)
        except ModelError as exc:
            stop = Stop(exc.status, str(exc))
        except Stop as exc:
            stop = exc
        return tally.result(run, stop)
