"""The strategies over the real loop, the real SDK, the scripted server and a real DuckDB store.

Each scripted conversation is keyed by its first user message, so the scripts below are built with
the strategies' own prompt functions; the assertions then check the stored tree with plain SQL.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.policy import DEFAULT_POLICY, Policy
from looptrace.loop.replies import ScriptItem
from looptrace.loop.result import RunResult
from looptrace.loop.scripted import Script, act, finish, say
from looptrace.loop.server import MessagesServer
from looptrace.loop.strategies import (
    parse_plan,
    parse_scores,
    plan_and_execute,
    reflexion,
    self_consistency,
    tree_of_thoughts,
    vote,
)
from looptrace.loop.strategies.plan_execute import plan_prompt, replan_prompt, step_task
from looptrace.loop.strategies.reflexion import attempt_task, reflect_prompt
from looptrace.loop.strategies.self_consistency import normalize
from looptrace.loop.strategies.tree_of_thoughts import execute_task, propose_prompt, score_prompt
from looptrace.loop.tools import Tool
from looptrace.tracer import Tracing

from .conftest import query

ECHO = Tool("echo", "Echo the text back.",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
            lambda text: text)

MakeWorker = Callable[..., Agent]


@pytest.fixture
def make_worker(db: Path) -> Iterator[MakeWorker]:
    """A worker ``Agent`` on a scripted server, tracing into ``db``; call ``agent.tracing.shutdown()``
    before querying the store."""
    with ExitStack() as stack:

        def make(conversations: Mapping[str, Sequence[ScriptItem]], policy: Policy = DEFAULT_POLICY) -> Agent:
            server = stack.enter_context(MessagesServer(Script(conversations)))
            tracing = stack.enter_context(Tracing(db))
            model = AnthropicModel("scripted", base_url=server.base_url, api_key="x",
                                   retry=RetryPolicy(base_delay=0.01))
            return Agent(model, [ECHO], tracing, policy=policy, name="worker")

        yield make


# The parent run first, then its children in start order; every row also carries the tree's totals.
TREE_SQL = """
SELECT run_id, parent_run_id, strategy, status, task, answer, error, n_llm_calls,
       sum(input_tokens) OVER () AS tree_input_tokens, sum(output_tokens) OVER () AS tree_output_tokens,
       sum(cost_usd) OVER () AS tree_cost_usd, sum(n_steps) OVER () AS tree_steps
FROM runs WHERE run_id = ? OR parent_run_id = ?
ORDER BY parent_run_id IS NOT NULL, started_at
"""
STEPS_SQL = "SELECT step, thought, events FROM steps WHERE run_id = ? ORDER BY step, call_index"


def tree(db: Path, result: RunResult) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The parent run's row and its children's rows, checking on the way that the parent's totals
    are the sums over the stored tree (its own model calls plus every child)."""
    names = ["run_id", "parent_run_id", "strategy", "status", "task", "answer", "error", "n_llm_calls",
             "tree_input_tokens", "tree_output_tokens", "tree_cost_usd", "tree_steps"]
    rows = query(db, TREE_SQL, [result.run_id] * 2)
    parent, *children = [dict(zip(names, row, strict=True)) for row in rows]
    assert parent["run_id"] == result.run_id and parent["parent_run_id"] is None
    assert sorted(c["run_id"] for c in children) == sorted(c.run_id for c in result.children)
    assert (result.input_tokens, result.output_tokens, result.steps) == (
        parent["tree_input_tokens"], parent["tree_output_tokens"], parent["tree_steps"])
    assert result.cost_usd == pytest.approx(parent["tree_cost_usd"])
    return parent, children


def events(db: Path, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, attributes) of the events on the run's steps, in step order."""
    rows = query(db, STEPS_SQL, [run_id])
    return [(e["name"], e["attributes"]) for _, _, raw in rows if raw for e in json.loads(raw)]


# -- plan and execute -------------------------------------------------------------------------------

TRIP = "Find when the deploy is and who owns it."
PLAN = ["Read the notes", "Find the owner", "Write the answer"]


def test_plan_runs_each_step_as_a_child_in_order(db: Path, make_worker: MakeWorker) -> None:
    plan = "Here is the plan:\n1. Read the notes\n2) Find the owner\n3. Write the answer"
    done1, done2 = [(PLAN[0], "deploy on 12-14")], [(PLAN[0], "deploy on 12-14"), (PLAN[1], "Ada")]
    agent = make_worker({
        plan_prompt(TRIP): [say(plan)],
        step_task(TRIP, 1, PLAN[0], []): [act("echo", {"text": "12-14"}), finish("deploy on 12-14")],
        step_task(TRIP, 2, PLAN[1], done1): [finish("Ada")],
        step_task(TRIP, 3, PLAN[2], done2): [finish("Ada deploys on 12-14.")],
    })
    result = plan_and_execute(agent, TRIP)
    agent.tracing.shutdown()

    assert (result.status, result.answer, result.error) == ("ok", "Ada deploys on 12-14.", None)
    assert [c.answer for c in result.children] == ["deploy on 12-14", "Ada", "Ada deploys on 12-14."]
    parent, children = tree(db, result)
    assert (parent["strategy"], parent["status"], parent["task"], parent["answer"]) == (
        "plan_execute", "ok", TRIP, "Ada deploys on 12-14.")
    assert parent["n_llm_calls"] == 1
    assert [(c["strategy"], c["status"]) for c in children] == [("plan_step", "ok")] * 3
    assert [c["run_id"] for c in children] == [c.run_id for c in result.children]
    assert children[0]["task"] == f"Step 1 of the plan for: {TRIP}\nRead the notes"
    assert children[2]["task"].startswith(f"Step 3 of the plan for: {TRIP}\nWrite the answer\n")
    assert "Find the owner -> Ada" in children[2]["task"] and "deploy on 12-14" in children[2]["task"]
    assert [thought for _, thought, _ in query(db, STEPS_SQL, [result.run_id])] == [plan]
    assert result.input_tokens > sum(c.input_tokens for c in result.children)  # the planner's call counts


def test_replan_revises_then_stops_early(db: Path, make_worker: MakeWorker) -> None:
    done1 = [(PLAN[0], "deploy on 12-14")]
    done2 = [*done1, ("Answer from the notes", "Ada, on 12-14")]
    agent = make_worker({
        plan_prompt(TRIP): [say("1. Read the notes\n2. Find the owner\n3. Write the answer")],
        step_task(TRIP, 1, PLAN[0], []): [finish("deploy on 12-14")],
        replan_prompt(TRIP, done1, PLAN[1:]): [say("The notes name the owner.\n1. Answer from the notes")],
        step_task(TRIP, 2, "Answer from the notes", done1): [finish("Ada, on 12-14")],
        replan_prompt(TRIP, done2, []): [say("DONE")],
    })
    result = plan_and_execute(agent, TRIP, replan=True)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("ok", "Ada, on 12-14")
    parent, children = tree(db, result)
    assert (parent["strategy"], parent["status"], parent["n_llm_calls"]) == ("plan_execute", "ok", 3)
    assert [c["task"].split("\n")[1] for c in children] == ["Read the notes", "Answer from the notes"]


def test_a_plan_longer_than_max_steps_runs_nothing(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({plan_prompt(TRIP): [say("1. a\n2. b\n3. c")]})
    result = plan_and_execute(agent, TRIP, max_steps=2)
    agent.tracing.shutdown()

    assert (result.status, result.answer, result.children) == ("max_iters", None, [])
    assert "3 steps, more than max_steps=2" in (result.error or "")
    parent, children = tree(db, result)
    assert (parent["status"], parent["error"], children) == ("max_iters", result.error, [])


def test_a_failed_step_ends_the_plan_with_its_status(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        plan_prompt(TRIP): [say("1. Read the notes\n2. Find the owner")],
        step_task(TRIP, 1, PLAN[0], []): [act("echo", {"text": "still looking"})],
    }, policy=Policy(max_iters=1))
    result = plan_and_execute(agent, TRIP)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("max_iters", None)
    assert (result.error or "").startswith("plan step 1 stopped with max_iters")
    parent, [child] = tree(db, result)
    assert (parent["status"], child["status"]) == ("max_iters", "max_iters")


def test_a_failed_planner_call_ends_the_run_with_its_status(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({})  # the scripted model answers 400: no conversation for this task
    result = plan_and_execute(agent, TRIP)
    agent.tracing.shutdown()

    assert (result.status, result.children) == ("error", [])
    assert "BadRequestError" in (result.error or "")
    # Its one call was refused: no usage was reported, so the store's totals are unknown (NULL), not 0.
    assert (result.input_tokens, result.output_tokens, result.cost_usd) == (0, 0, 0.0)  # the loop's own tally
    [(status, error, calls, tokens, cost)] = query(
        db, "SELECT status, error, n_llm_calls, input_tokens, cost_usd FROM runs WHERE run_id = ?", [result.run_id])
    assert (status, error, calls, tokens, cost) == ("error", result.error, 1, None, None)


@pytest.mark.parametrize(("text", "steps"), [
    ("1. a\n2. b\n3. c", ["a", "b", "c"]),
    ("Here is the plan:\n1) read it\n2) answer", ["read it", "answer"]),
    ("Step 1: look\nStep 2 - answer", ["look", "answer"]),
    ("1: one\n  more of one\n2. two", ["one more of one", "two"]),
    ("**1.** bold\n**2.** bolder", ["bold", "bolder"]),
    ("1. only\n\nThat is all.", ["only"]),
    ("  10. indented and two digits", ["indented and two digits"]),
    ("DONE", []),
    ("", []),
    ("- a bullet\n- is not a plan", []),
    ("1.5 kg of flour", []),
])
def test_parse_plan(text: str, steps: list[str]) -> None:
    assert parse_plan(text) == steps


# -- reflexion ---------------------------------------------------------------------------------------

ADD = "Write add(a, b) and report add(2, 2)."
LESSON = "I added wrong. Compute 2 + 2 with a tool before answering."


def add_tests(answer: str) -> tuple[bool, str]:
    """The failing-test signal: a tiny test suite run on the answer."""
    return answer == "4", f"test_add failed: expected 4, got {answer}"


def test_reflexion_carries_the_lesson_into_the_next_attempt(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        ADD: [finish("5")],
        reflect_prompt(ADD, "5", "test_add failed: expected 4, got 5"): [say(LESSON)],
        attempt_task(ADD, [LESSON]): [act("echo", {"text": "2 + 2 = 4"}), finish("4")],
    })
    result = reflexion(agent, ADD, add_tests)
    agent.tracing.shutdown()

    assert (result.status, result.answer, result.reflections) == ("ok", "4", 1)
    assert [c.answer for c in result.children] == ["5", "4"]
    parent, children = tree(db, result)
    assert (parent["strategy"], parent["status"], parent["answer"], parent["n_llm_calls"]) == (
        "reflexion", "ok", "4", 1)
    assert [(c["strategy"], c["answer"]) for c in children] == [("attempt", "5"), ("attempt", "4")]
    assert children[0]["task"] == ADD
    assert children[1]["task"] == f"{ADD}\n\nLessons from earlier attempts:\n- {LESSON}"
    assert [thought for _, thought, _ in query(db, STEPS_SQL, [result.run_id])] == [LESSON]


def test_reflexion_fails_when_every_attempt_fails(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        ADD: [finish("5")],
        reflect_prompt(ADD, "5", "test_add failed: expected 4, got 5"): [say(LESSON)],
        attempt_task(ADD, [LESSON]): [finish("22")],
    })
    result = reflexion(agent, ADD, add_tests, max_attempts=2)
    agent.tracing.shutdown()

    assert (result.status, result.answer, len(result.children)) == ("error", None, 2)
    assert result.error is not None and result.error.startswith("all 2 attempts failed")
    assert "got 5" in result.error and "got 22" in result.error
    parent, _ = tree(db, result)
    assert (parent["status"], parent["error"]) == ("error", result.error)
    assert parent["n_llm_calls"] == 1  # no reflection after the last attempt: nobody would read it


# -- self-consistency -----------------------------------------------------------------------------

CAPITAL = "What is the capital of France?"


@pytest.mark.parametrize("parallel", [True, False])
def test_self_consistency_takes_the_majority(db: Path, make_worker: MakeWorker, parallel: bool) -> None:
    # One conversation serves all three samples, its replies handed out in arrival order.
    agent = make_worker({CAPITAL: [finish("Paris"), finish(" paris "), finish("Lyon")]})
    result = self_consistency(agent, CAPITAL, samples=3, parallel=parallel)
    agent.tracing.shutdown()

    assert result.status == "ok" and normalize(result.answer or "") == "paris"
    assert Counter(c.answer for c in result.children) == Counter(["Paris", " paris ", "Lyon"])
    parent, children = tree(db, result)
    assert (parent["strategy"], parent["status"], parent["n_llm_calls"]) == ("self_consistency", "ok", 0)
    assert [(c["strategy"], c["status"], c["task"]) for c in children] == [("sample", "ok", CAPITAL)] * 3
    assert Counter(c["answer"] for c in children) == Counter(["Paris", " paris ", "Lyon"])
    [(name, tally)] = events(db, result.run_id)
    assert name == "vote"
    assert (tally["winner"], tally["samples"], tally["voters"]) == ("paris", 3, 3)
    assert json.loads(tally["counts"]) == {"paris": 2, "lyon": 1}


def test_self_consistency_fails_when_no_sample_answers(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({CAPITAL: [act("echo", {"text": str(i)}) for i in range(2)]},
                        policy=Policy(max_iters=1))
    result = self_consistency(agent, CAPITAL, samples=2)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("max_iters", None)
    assert "no sample produced an answer" in (result.error or "")
    parent, children = tree(db, result)
    assert parent["status"] == "max_iters" and [c["status"] for c in children] == ["max_iters"] * 2
    [(name, tally)] = events(db, result.run_id)
    assert name == "vote"
    assert "winner" not in tally and json.loads(tally["counts"]) == {}


@pytest.mark.parametrize(("answers", "expected"), [
    (["a", "b", "a"], ("a", {"a": 2, "b": 1})),
    ([" Paris ", "paris", "PARIS\n"], ("paris", {"paris": 3})),
    (["New  York", "new york", "LA"], ("new york", {"new york": 2, "la": 1})),
    (["Straße", "STRASSE"], ("strasse", {"strasse": 2})),
    (["x", "y"], ("x", {"x": 1, "y": 1})),
    (["y", "x", "x", "y"], ("y", {"y": 2, "x": 2})),
    ([None, "b", None], ("b", {"b": 1})),
    ([None, None], (None, {})),
    (["", "   "], (None, {})),
    ([], (None, {})),
])
def test_vote(answers: list[str | None], expected: tuple[str | None, dict[str, int]]) -> None:
    assert vote(answers) == expected


# -- tree of thoughts -----------------------------------------------------------------------------

ROME = "Plan a 3-day trip to Rome."
LEVEL1 = ["Museums first", "Food tour", "Walk everywhere"]
LEVEL2 = ["Trastevere dinner", "Market breakfast", "Pizza class"]


def test_tot_runs_the_highest_scored_path(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        propose_prompt(ROME, [], 3): [say("1. Museums first\n2. Food tour\n3. Walk everywhere")],
        score_prompt(ROME, [], LEVEL1): [say("1: 4\n2: 9\n3: 6")],
        propose_prompt(ROME, ["Food tour"], 3): [say("1. Trastevere dinner\n2. Market breakfast\n"
                                                     "3. Pizza class")],
        score_prompt(ROME, ["Food tour"], LEVEL2): [say("1. 0.5\n2. 0.3\n3. 0.8")],
        execute_task(ROME, ["Food tour", "Pizza class"]): [finish("Day 1 food tour, day 2 pizza class.")],
    })
    result = tree_of_thoughts(agent, ROME, breadth=3, depth=2)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("ok", "Day 1 food tour, day 2 pizza class.")
    parent, [child] = tree(db, result)
    assert (parent["strategy"], parent["status"], parent["n_llm_calls"]) == ("tree_of_thoughts", "ok", 4)
    assert child["strategy"] == "execute_path"
    assert child["task"] == f"{ROME}\n\nFollow this approach:\n1. Food tour\n2. Pizza class"
    found = events(db, result.run_id)
    assert [(name, attrs["level"], json.loads(attrs["candidates"])) for name, attrs in found] == [
        ("candidates", 1, LEVEL1), ("scores", 1, LEVEL1), ("candidates", 2, LEVEL2), ("scores", 2, LEVEL2)]
    scores = [json.loads(attrs["scores"]) for name, attrs in found if name == "scores"]
    assert scores == [[4, 9, 6], [0.5, 0.3, 0.8]]


def test_tot_keeping_two_lets_a_weaker_first_thought_win(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        propose_prompt(ROME, [], 2): [say("1. A\n2. B\n3. C is one too many")],
        score_prompt(ROME, [], ["A", "B"]): [say("1: 5\n2: 6")],
        propose_prompt(ROME, ["B"], 2): [say("1. B1\n2. B2")],
        score_prompt(ROME, ["B"], ["B1", "B2"]): [say("1: 2\n2: 3")],
        propose_prompt(ROME, ["A"], 2): [say("1. A1\n2. A2")],
        score_prompt(ROME, ["A"], ["A1", "A2"]): [say("1: 9\n2: 1")],
        execute_task(ROME, ["A", "A1"]): [finish("via A1")],
    })
    result = tree_of_thoughts(agent, ROME, breadth=2, depth=2, keep=2)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("ok", "via A1")
    parent, [child] = tree(db, result)
    assert parent["n_llm_calls"] == 6 and child["task"] == execute_task(ROME, ["A", "A1"])


def test_tot_budget_stops_the_search_and_runs_the_best_path_so_far(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        propose_prompt(ROME, [], 3): [say("1. Museums first\n2. Food tour\n3. Walk everywhere")],
        # A million input tokens of the scripted model cost $3, well past the budget.
        score_prompt(ROME, [], LEVEL1): [say("1: 4\n2: 9\n3: 6", input_tokens=1_000_000)],
        execute_task(ROME, ["Food tour"]): [finish("Eat.")],
    })
    result = tree_of_thoughts(agent, ROME, breadth=3, depth=2, budget_usd=0.5)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("ok", "Eat.")
    parent, [child] = tree(db, result)
    assert parent["n_llm_calls"] == 2 and child["task"] == execute_task(ROME, ["Food tour"])
    *_, (name, stop) = events(db, result.run_id)
    assert name == "budget_stop"
    assert stop["level"] == 2 and stop["budget_usd"] == 0.5 and stop["spent_usd"] >= 3.0
    assert result.cost_usd > 3.0


def test_tot_budget_spent_by_the_proposer_runs_its_first_thought(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({
        propose_prompt(ROME, [], 3): [say("1. Museums first\n2. Food tour\n3. Walk everywhere",
                                          input_tokens=1_000_000)],
        execute_task(ROME, ["Museums first"]): [finish("See art.")],
    })
    result = tree_of_thoughts(agent, ROME, budget_usd=0.5)
    agent.tracing.shutdown()

    assert (result.status, result.answer) == ("ok", "See art.")
    assert [(name, attrs["level"]) for name, attrs in events(db, result.run_id)] == [
        ("candidates", 1), ("budget_stop", 1)]


def test_tot_with_no_budget_left_proposes_nothing(db: Path, make_worker: MakeWorker) -> None:
    agent = make_worker({})
    result = tree_of_thoughts(agent, ROME, budget_usd=0.0)
    agent.tracing.shutdown()

    assert (result.status, result.answer, result.children) == ("budget_exceeded", None, [])
    assert "before any thought was proposed" in (result.error or "")
    assert [(name, attrs["level"]) for name, attrs in events(db, result.run_id)] == [("budget_stop", 1)]


@pytest.mark.parametrize(("text", "n", "scores"), [
    ("1: 7\n2: 3\n3: 9", 3, [7, 3, 9]),
    ("1. 0.7\n2. 0.2", 2, [0.7, 0.2]),
    ("1: 7", 3, [7, 0, 0]),
    ("Scores:\n3) 8/10\n1) 5/10", 3, [5, 0, 8]),
    ("Thought 2: score 6", 2, [0, 6]),
    ("1: **9**", 1, [9]),
    ("1: -2", 1, [-2]),
    ("4: 9\n1: 2", 2, [2, 0]),
    ("1: 7\n1: 2", 1, [7]),
    ("no scores here", 2, [0, 0]),
    ("", 0, []),
])
def test_parse_scores(text: str, n: int, scores: list[float]) -> None:
    assert parse_scores(text, n) == scores
