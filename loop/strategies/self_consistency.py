"""Self-consistency: run the same task several times and keep the answer most runs agree on.

Samples are independent ReAct runs (in parallel threads by default), so their diversity comes from
the model's sampling: keep the worker's temperature above zero. Voting is on normalized answers
(case, surrounding and repeated whitespace ignored), so "Paris" and " paris " agree; the parent's
answer is the first sample's own text in the winning group. Voting needs no model call, so the
tally is recorded as a ``vote`` event on a parent step of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from looptrace.tracer import Run
from looptrace.tracer.records.text import to_json

from ..agent import Agent
from ..result import RunResult, Stop
from ._common import Tally, run_strategy

__all__ = ["SAMPLE_STRATEGY", "STRATEGY", "normalize", "self_consistency", "vote"]

STRATEGY = "self_consistency"
SAMPLE_STRATEGY = "sample"


def normalize(answer: str) -> str:
    return " ".join(answer.split()).casefold()


def vote(answers: Sequence[str | None]) -> tuple[str | None, dict[str, int]]:
    """The normalized majority answer and the votes per normalized answer.

    ``None`` (a failed sample) and blank answers do not vote; a tie goes to the answer seen first.
    The winner is ``None`` when nobody voted.
    """
    counts: dict[str, int] = {}
    for answer in answers:
        key = normalize(answer) if answer is not None else ""
        if key:
            counts[key] = counts.get(key, 0) + 1
    # max() keeps the first of equal counts, and dicts keep first-seen order.
    winner = max(counts, key=counts.__getitem__, default=None)
    return winner, counts


def self_consistency(agent: Agent, task: str, *, samples: int = 3, parallel: bool = True) -> RunResult:
    """``samples`` child runs of ``task``, then a majority vote; ``ok`` when any sample answered."""
    if samples < 1:
        raise ValueError("samples must be at least 1")

    def body(run: Run, tally: Tally) -> Stop:
        def sample(_: int) -> RunResult:
            return agent.run(task, parent=run, strategy=SAMPLE_STRATEGY)

        if parallel and samples > 1:
            with ThreadPoolExecutor(samples, thread_name_prefix="looptrace-sample") as pool:
                results = list(pool.map(sample, range(samples)))
        else:
            results = [sample(i) for i in range(samples)]
        for result in results:
            tally.add(result)
        answers = [r.answer if r.ok else None for r in results]
        winner, counts = vote(answers)
        with run.step() as step:
            step.event("vote", winner=winner, counts=to_json(counts),
                       samples=samples, voters=sum(counts.values()))
        if winner is None:
            last = results[-1]
            statuses = ", ".join(r.status for r in results)
            return Stop(last.status if not last.ok else "error",
                        f"no sample produced an answer (statuses: {statuses})")
        return Stop("ok", answer=next(a for a in answers if a is not None and normalize(a) == winner))

    return run_strategy(agent, task, STRATEGY, body)
