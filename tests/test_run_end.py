"""How a run ended (replay/analyzer/ending.py): ``ok`` only on evidence, else ``error`` or ``incomplete``."""

from __future__ import annotations

import pytest

from looptrace.replay.analyzer import RunView, StepView, diagnose
from looptrace.replay.analyzer.ending import crash_text


def act(step: int, tool: str | None = "read", obs: str | None = "x", text: str | None = None, **kw: object) -> StepView:
    return StepView(step=step, tool=tool, args='{"path": "a"}' if tool else None, observation_key=obs,
                    end_text=text, **kw)  # type: ignore[arg-type]


def run(steps: list[StepView], status: str = "ok", **kw: object) -> RunView:
    return RunView("r", status, tuple(steps), **kw)  # type: ignore[arg-type]


def answered(n: int = 3, last: str = "Here is the summary.") -> list[StepView]:
    return [act(i + 1, obs=f"o{i}") for i in range(n)] + [act(n + 1, tool=None, obs=None, text=last)]


@pytest.mark.parametrize(("name", "r", "label"), [
    ("status ok and a final answer", run(answered()), "ok"),
    ("no status but a submit marker", run(answered(last="Submitted"), "incomplete"), "ok"),
    ("an AutoGen termination word", run(answered(last="All done. TERMINATE"), "incomplete"), "ok"),
    ("no steps at all", run([], "ok"), "incomplete"),
    ("no steps, no end record", run([], "incomplete"), "incomplete"),
    ("the log stops mid-action", run([act(1), act(2, obs=None)], "ok"), "incomplete"),
    ("a trace without its root", run(answered(), "incomplete"), "incomplete"),
    ("interrupted by the user", run(answered(), "interrupted"), "incomplete"),
    ("the source's error status", run(answered(), "error", error="boom"), "error"),
    ("a crash in the last message", run(answered(last="Traceback (most recent call last):\n  File \"x.py\"\n"
                                                    "RuntimeError: event loop is closed"), "ok"), "error"),
    ("an exception line in the run's error", run(answered(), "ok", error="openai.APIConnectionError: refused"),
     "error"),
    ("a traceback read mid-run, then submitted",
     run([act(1, text="Traceback (most recent call last):\nValueError: x"), act(2, tool=None, obs=None,
                                                                             text="Submitted")]), "ok"),
    ("a tool's plain 'Error:' answer is not a crash", run(answered(last="Error: no such flight")), "ok"),
    ("a forced final answer after the cap",
     run(answered(last="Max rounds (30) reached.\nFINAL ANSWER: 42"), "ok"), "cap_hit"),
    ("a cap status says why it stopped", run([act(1), act(2, obs=None)], "max_iters"), "cap_hit"),
    # end tools end runs, answer included, whether or not a result was recorded
    ("final_answer with no result recorded", run([act(1), act(2, tool="final_answer", obs=None)], "ok"), "ok"),
    ("final_answer, no status recorded", run([act(1), act(2, tool="final_answer", obs=None)], "incomplete"), "ok"),
    ("submit ends a run", run([act(1), act(2, tool="submit", obs=None)], "incomplete"), "ok"),
    ("an end tool called mid-run is not the end",
     run([act(1, tool="final_answer"), act(2, obs=None)], "incomplete"), "incomplete"),
    ("an end tool that failed is not an end",
     run([act(1), act(2, tool="final_answer", obs="TypeError", is_error=True)], "incomplete"), "incomplete"),
    # weigh the evidence: success and a final answer outweigh one call without its result
    ("an unanswered call, but success and a final answer", run([act(1), act(2, obs=None)], "ok", answer="42"), "ok"),
    ("an unanswered call, success but no answer", run([act(1), act(2, obs=None)], "ok"), "incomplete"),
    ("an unanswered call, a final answer but no recorded end",
     run([act(1), act(2, obs=None)], "incomplete", answer="42"), "incomplete"),
    # a crash in the last messages, whichever agent wrote it, unless an end is recorded after it
    ("a crash two messages before the end",
     run(answered(n=3, last="Let me summarise.")[:3] + [act(4, tool=None, obs=None, text="Error processing publish "
                                                              "message for Coder/default"),
                                                         act(5, tool=None, obs=None, text="I will wait.")], "ok"),
     "error"),
    ("a crash, then a final answer after it",
     run([act(1, text="Traceback (most recent call last):\nKeyError: 'x'"),
          act(2, tool=None, obs=None, text="FINAL ANSWER: 3")], "incomplete"), "ok"),
    ("a crash after the final answer",
     run([act(1, tool=None, obs=None, text="FINAL ANSWER: 3"),
          act(2, tool=None, obs=None, text="Traceback (most recent call last):\nKeyError: 'x'")], "ok"), "error"),
    ("a crash long before the end is history", run([act(1, text="ValueError: x")] + answered(5)[1:], "ok"), "ok"),
    ("a tool's exception the agent went on from is not a crash",
     run([act(1), act(2, text="AgentToolExecutionError: Unknown tool x", is_error=True), act(3),
          act(4, tool=None, obs=None, text="The answer is 3.")], "ok"), "ok"),
])
def test_end_label(name: str, r: RunView, label: str) -> None:
    found = diagnose(r)
    assert found and found[0].label == label, (name, found)


def test_error_evidence_is_the_error_text_and_the_step() -> None:
    r = run(answered(last="ValueError: could not convert 'abc'"), "ok")
    d = diagnose(r)[0]
    assert (d.label, d.evidence["step"], d.evidence["error"]) == ("error", 4, "ValueError: could not convert 'abc'")
    assert "step 4" in d.explanation and "ValueError" in d.explanation


def test_incomplete_names_the_action_left_waiting() -> None:
    d = diagnose(run([act(1), act(2, tool="search", obs=None)], "ok"))[0]
    assert d.evidence == {"status": "ok", "reason": "stops mid-action", "step": 2, "tool": "search",
                          "confidence": "medium", "decided_by": "unanswered last call"}


def test_an_interrupted_run_says_it_was_interrupted() -> None:
    # A session stopped by Ctrl-C (the Codex CLI's turn_aborted) recorded how it ended: not "no end".
    d = diagnose(run([act(1), act(2, tool=None, obs=None, text="thinking")], "interrupted"))[0]
    assert (d.label, d.evidence["reason"], d.evidence["decided_by"]) == ("incomplete", "interrupted",
                                                                         "interrupted status")
    assert "interrupted" in d.explanation and "No end was recorded" not in d.explanation


def test_a_failure_keeps_its_crash_as_secondary() -> None:
    loop = [act(i + 1, obs="same") for i in range(6)]
    found = diagnose(run(loop, "error", error="RuntimeError: killed"))
    assert [d.label for d in found] == ["stagnation", "error"]


def test_every_run_gets_a_diagnosis() -> None:
    for status in ("ok", "error", "incomplete", "interrupted", "tool_error", "max_iters", "whatever"):
        assert diagnose(run(answered(), status)), status


@pytest.mark.parametrize(("text", "found"), [
    ("Traceback (most recent call last):\n  File ...", "Traceback (most recent call last):"),
    ("out\nautogen.exceptions.NoEligibleSpeakerError: none\n", "autogen.exceptions.NoEligibleSpeakerError: none"),
    ("Error: the flight is full", None), ("I fixed the ValueError: in parse()", None), (None, None),
])
def test_crash_text(text: str | None, found: str | None) -> None:
    assert crash_text(text) == found


def test_an_end_tool_carries_its_answer_and_what_decided() -> None:
    d = diagnose(run([act(1), StepView(step=2, tool="final_answer", args='{"answer": "Paris"}')], "incomplete"))[0]
    assert (d.label, d.evidence["decided_by"], d.evidence["end_tool"], d.evidence["answer"]) == (
        "ok", "end tool", "final_answer", "Paris")
    positional = diagnose(run([StepView(step=1, tool="final_answer", args='["Paris"]')], "incomplete"))[0]
    assert positional.evidence["answer"] == "Paris"


def test_a_missing_result_lowers_confidence_rather_than_flipping_the_verdict() -> None:
    sure = diagnose(run(answered(), "ok", answer="done"))[0]
    unsure = diagnose(run([act(1), act(2, obs=None)], "ok", answer="done"))[0]
    assert (sure.label, sure.evidence["confidence"]) == ("ok", "high")
    assert (unsure.label, unsure.evidence["confidence"], unsure.evidence["decided_by"]) == (
        "ok", "medium", "status and final answer")
    assert "no result was recorded" in unsure.explanation


def test_the_crash_line_and_its_step_are_the_evidence() -> None:
    r = run([act(1), act(2, tool=None, obs=None, text="Error processing publish message for Coder/default\n"
                                                       "Traceback (most recent call last):\n  File \"a.py\"\n"
                                                       "openai.RateLimitError: 429"),
             act(3, tool=None, obs=None, text="Planner: next step?")], "ok")
    d = diagnose(r)[0]
    assert (d.label, d.evidence["step"], d.evidence["decided_by"]) == ("error", 2, "crash text")
    assert d.evidence["error"] == "openai.RateLimitError: 429"  # the cause, where the traceback ends
    alone = diagnose(run([act(1, tool=None, obs=None, text="Error processing publish message for Coder/x")], "ok"))[0]
    assert alone.evidence["error"] == "Error processing publish message for Coder/x"
