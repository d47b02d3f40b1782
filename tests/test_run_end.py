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
    assert d.evidence == {"status": "ok", "reason": "stops mid-action", "step": 2, "tool": "search"}


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
