"""Tree of thoughts: search over short plans with a proposer and a scorer, then act on the best one.

The search is breadth-first: at each level, for every kept path, one proposer call lists ``breadth``
next thoughts and one scorer call scores them; the ``keep`` best paths of the level go on. Only the
winning path is executed, as one ReAct run whose task carries its thoughts, so the search costs
model calls but no tool calls. ``budget_usd`` caps the search (the parent's own calls): it is
checked before every proposer and scorer call, and once spent the best path so far is executed under
the worker's own policy. Candidates and scores are events on the parent's steps, so the whole tree
can be read back from the store.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from looptrace.tracer import Run
from looptrace.tracer.spans.conversation import response_text
from looptrace.tracer.records.text import to_json

from ..agent import Agent
from ..result import RunResult, Stop
from ._common import Tally, ask, numbered, parse_plan, request, run_strategy

__all__ = [
    "EXECUTE_STRATEGY",
    "PROPOSE_PREFIX",
    "PROPOSE_SYSTEM",
    "SCORE_PREFIX",
    "SCORE_SYSTEM",
    "STRATEGY",
    "execute_task",
    "parse_scores",
    "propose_prompt",
    "score_prompt",
    "tree_of_thoughts",
]

STRATEGY = "tree_of_thoughts"
EXECUTE_STRATEGY = "execute_path"
PROPOSE_PREFIX = "Propose next thoughts for: "
SCORE_PREFIX = "Score these thoughts for: "
PROPOSE_SYSTEM = (
    "You help an agent search for a good approach. Given a task and the thoughts chosen so far, propose "
    "distinct next thoughts (one concrete idea or step each) as a numbered list, and nothing else."
)
SCORE_SYSTEM = (
    "You judge candidate next thoughts for a task. Score each from 0 (useless) to 10 (clearly leads to "
    "the answer), one line per candidate as `<number>: <score>`, and nothing else."
)

# "1: 7", "2. 0.7", "3) 8/10", "Thought 4: score 6", "5: **9**"
_SCORE = re.compile(
    r"^\s*(?:thought\s+|candidate\s+)?#?(\d+)\s*[.:)=-]\s*"  # the candidate's number
    r"(?:score\s*[:=]?\s*)?\**(-?\d+(?:\.\d+)?)",  # its score
    re.IGNORECASE,
)


def parse_scores(text: str, n: int) -> list[float]:
    """A score for each of ``n`` candidates, by the 1-based number on each line; missing ones score 0."""
    scores: dict[int, float] = {}
    for line in text.splitlines():
        match = _SCORE.match(line)
        if match and 1 <= int(match.group(1)) <= n:
            scores.setdefault(int(match.group(1)), float(match.group(2)))
    return [scores.get(i, 0.0) for i in range(1, n + 1)]


def _so_far(path: Sequence[str]) -> str:
    return numbered(path) or "(none yet)"


def propose_prompt(task: str, path: Sequence[str], breadth: int) -> str:
    return f"{PROPOSE_PREFIX}{task}\n\nThoughts so far:\n{_so_far(path)}\n\nPropose {breadth} next thoughts."


def score_prompt(task: str, path: Sequence[str], candidates: Sequence[str]) -> str:
    return f"{SCORE_PREFIX}{task}\n\nThoughts so far:\n{_so_far(path)}\n\nCandidates:\n{numbered(candidates)}"


def execute_task(task: str, path: Sequence[str]) -> str:
    return f"{task}\n\nFollow this approach:\n{numbered(path)}"


@dataclass(frozen=True)
class _Path:
    thoughts: tuple[str, ...]
    score: float = 0.0


@dataclass
class _Search:
    agent: Agent
    task: str
    breadth: int
    budget_usd: float | None
    run: Run
    tally: Tally

    def expand(self, level: int, frontier: list[_Path]) -> tuple[list[_Path], list[_Path], bool]:
        """The scored children of ``frontier``, the unscored ones if the budget stopped in between,
        and whether it did."""
        scored: list[_Path] = []
        for path in frontier:
            if self.budget_stop(level):
                return scored, [], True
            with self.run.step() as step:
                prompt = propose_prompt(self.task, path.thoughts, self.breadth)
                reply = ask(step, self.agent, request(self.agent, PROPOSE_SYSTEM, prompt), self.tally)
                candidates = parse_plan(response_text(reply))[: self.breadth]
                step.event("candidates", level=level, path=to_json(path.thoughts),
                           candidates=to_json(candidates))
            children = [_Path((*path.thoughts, c)) for c in candidates]
            if not candidates:
                continue
            if self.budget_stop(level):
                return scored, children, True
            with self.run.step() as step:
                prompt = score_prompt(self.task, path.thoughts, candidates)
                reply = ask(step, self.agent, request(self.agent, SCORE_SYSTEM, prompt), self.tally)
                scores = parse_scores(response_text(reply), len(candidates))
                step.event("scores", level=level, path=to_json(path.thoughts),
                           candidates=to_json(candidates), scores=to_json(scores))
            scored += [_Path(p.thoughts, s) for p, s in zip(children, scores, strict=True)]
        return scored, [], False

    def budget_stop(self, level: int) -> bool:
        if self.budget_usd is None or self.tally.cost_usd < self.budget_usd:
            return False
        with self.run.step() as step:
            step.event("budget_stop", level=level, spent_usd=self.tally.cost_usd, budget_usd=self.budget_usd)
        return True


def tree_of_thoughts(agent: Agent, task: str, *, breadth: int = 3, depth: int = 2, keep: int = 1,
                     budget_usd: float | None = None) -> RunResult:
    """Search ``depth`` levels of ``breadth`` thoughts, keeping the ``keep`` best, then run the best path.

    If the budget stops the search between a proposer and its scorer on the first level, the first
    proposed thought is run. Ends ``budget_exceeded`` when the budget stops the search before any
    thought was proposed, ``error`` when the proposer proposes nothing, else with the executing
    run's status.
    """
    if min(breadth, depth, keep) < 1:
        raise ValueError("breadth, depth and keep must be at least 1")

    def body(run: Run, tally: Tally) -> Stop:
        search = _Search(agent, task, breadth, budget_usd, run, tally)
        frontier = [_Path(())]
        unscored: list[_Path] = []
        stopped = False
        for level in range(1, depth + 1):
            scored, unscored, stopped = search.expand(level, frontier)
            if scored:
                # sorted() is stable with reverse=True too: equal scores keep the order proposed.
                frontier = sorted(scored, key=lambda p: p.score, reverse=True)[:keep]
            if stopped or not scored:
                break
        best = unscored[0] if unscored and not frontier[0].thoughts else frontier[0]
        if not best.thoughts:
            if stopped:
                return Stop("budget_exceeded", f"spent ${tally.cost_usd:.4f} of a ${budget_usd:.4f}"
                                               " search budget before any thought was proposed")
            return Stop("error", "the proposer proposed no thoughts")
        child = tally.add(agent.run(execute_task(task, best.thoughts), parent=run, strategy=EXECUTE_STRATEGY))
        if not child.ok:
            return Stop(child.status, f"running the best path stopped with {child.status}: {child.error}")
        return Stop("ok", answer=child.answer)

    return run_strategy(agent, task, STRATEGY, body)
