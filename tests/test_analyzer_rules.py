"""Every analyzer rule on runs built inline, with the near misses that must not fire."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptrace.replay.analyzer import RunView, StepView, Thresholds, diagnose, load_thresholds
from looptrace.replay.analyzer.rules import cap_hit, context_bomb, hallucinated_tool, stagnation

T = Thresholds()


def act(step: int, tool: str = "read", arg: str = "a", obs: str | None = None, **kw: object) -> StepView:
    return StepView(step=step, tool=tool, args=f'{{"path": "{arg}"}}', observation_key=obs or f"o{step}",
                    observation_bytes=kw.pop("obs_bytes", 100), **kw)  # type: ignore[arg-type]


def run(steps: list[StepView], status: str = "ok", **kw: object) -> RunView:
    return RunView("r", status, tuple(steps), **kw)  # type: ignore[arg-type]


def varied(n: int) -> list[StepView]:
    return [act(i + 1, arg=f"f{i}") for i in range(n)]


@pytest.mark.parametrize(
    ("name", "steps", "fires", "kind"),
    [
        ("same action 5 times, same result", varied(2) + [act(3 + i, arg="x", obs="same") for i in range(5)], True,
         "repeat"),
        ("same action 4 times only", varied(2) + [act(3 + i, arg="x", obs="same") for i in range(4)], False, None),
        ("same action 11 times, each result new (paging)", [act(i + 1, tool="scroll_down", arg="") for i in range(11)],
         False, None),
        ("same action, results flip between two", [act(i + 1, arg="x", obs="ab"[i % 2]) for i in range(6)], True,
         "repeat"),
        ("same action, same result, but it fails then succeeds",
         [act(i + 1, arg="x", obs="same", is_error=i % 2 == 0) for i in range(5)], False, None),
        ("cycle of 2, five times", [act(i + 1, arg="ab"[i % 2], obs="ab"[i % 2]) for i in range(10)], True,
         "cycle"),
        ("cycle of 3, five times", [act(i + 1, arg="abc"[i % 3], obs="abc"[i % 3]) for i in range(15)], True,
         "cycle"),
        ("cycle of 2, four times", [act(i + 1, arg="ab"[i % 2], obs="ab"[i % 2]) for i in range(8)], False, None),
        ("edit, test, edit, test with new results", [act(i + 1, arg="ab"[i % 2]) for i in range(12)], False, None),
        ("same observation, varying args",
         [act(i + 1, arg=f"q{i}", obs="nothing found here, try another query", obs_bytes=80) for i in range(5)],
         True, "same_observation"),
        ("same short observation is generic",
         [act(i + 1, arg=f"q{i}", obs="<returncode>0</returncode><output></output>", obs_bytes=45)
          for i in range(8)], False, None),
        ("two identical reads of different files", [act(1, arg="a.py"), act(2, arg="b.py")], False, None),
        ("long healthy run", varied(200), False, None),
    ],
)
def test_stagnation(name: str, steps: list[StepView], fires: bool, kind: str | None) -> None:
    d = stagnation(run(steps), T)
    assert (d is not None) == fires, name
    if d is not None:
        assert d.evidence["kind"] == kind
        assert d.first_step is not None and d.last_step is not None and d.first_step < d.last_step


def test_stagnation_evidence_names_the_repeated_steps() -> None:
    d = stagnation(run(varied(3) + [act(4 + i, arg="x", obs="same") for i in range(6)] + varied(2)), T)
    assert d is not None and (d.first_step, d.last_step) == (4, 9) and d.evidence["repeats"] == 6
    assert 'read {"path":"x"} ran 6 times in a row' in d.explanation


def test_stagnation_explanation_clips_long_arguments() -> None:
    long = "x" * 500
    d = stagnation(run([act(i + 1, arg=long, obs="same") for i in range(5)]), T)
    assert d is not None and 'read {"path":"xxxx' in d.explanation and "…" in d.explanation
    assert len(d.explanation) < 200


def ctx(step: int, tokens: int, obs_bytes: int = 400) -> StepView:
    return act(step, arg=f"f{step}", context_tokens=tokens, obs_bytes=obs_bytes)


@pytest.mark.parametrize(
    ("name", "r", "kind"),
    [
        ("provider refused the prompt", run([ctx(1, 1000), ctx(2, 150_000)], "context_overflow"), "overflow"),
        ("error text says prompt too long", run([ctx(1, 10)], "error", error="400: prompt is too long: 201000"),
         "overflow"),
        ("one observation of 60k tokens", run([ctx(1, 1000), ctx(2, 2000, obs_bytes=240_000)], model="claude-x"),
         "observation"),
        ("context near the window", run([ctx(i + 1, 40_000 * (i + 1)) for i in range(5)], model="claude-sonnet-4"),
         "near_window"),
        ("window depends on the model", run([ctx(1, 120_000)], model="gpt-4o-2024-08-06"), "near_window"),
        ("a 32k model", run([ctx(1, 1000), ctx(2, 30_000)], model="swe-agent-lm-32b"), "near_window"),
        ("window from the model's name", run([ctx(1, 120_000)], model="doubao-pro-128k"), "near_window"),
        ("unknown model: no window, no ratio", run([ctx(1, 1000), ctx(2, 2000, obs_bytes=4_000_000)], model="mystery"),
         None),
        ("no model: no window, no ratio", run([ctx(i + 1, 400_000 * (i + 1)) for i in range(5)]), None),
        ("the trace's own window wins", run([ctx(1, 1000), ctx(2, 9_500)], model="claude-x",
                                            attributes='{"context_window": 10000}'), "near_window"),
        ("healthy growth", run([ctx(i + 1, 1000 * (i + 1)) for i in range(20)], model="claude-x"), None),
    ],
)
def test_context_bomb(name: str, r: RunView, kind: str | None) -> None:
    d = context_bomb(r, T)
    assert (d.evidence["kind"] if d else None) == kind, name


def test_context_bomb_names_the_step_that_pushed_it_over() -> None:
    steps = [ctx(1, 1000), ctx(2, 3000), ctx(3, 5000, obs_bytes=400_000), ctx(4, 105_000), ctx(5, 120_000)]
    d = context_bomb(run(steps, model="gpt-4o"), Thresholds(observation_share=0.9))
    assert d is not None and d.evidence["kind"] == "near_window"
    # 0.9 x 128k is crossed at step 5; step 4's result brought the prompt there.
    assert d.first_step == 4 and d.evidence["pushing_step"] == 4 and d.evidence["crossing_step"] == 5
    assert d.evidence["pushing_tokens"] == 15_000
    assert "step 4 added 15000 tokens, 12% of the window" in d.explanation
    # 15k tokens a step from 120k at step 5: 128k is reached at step 5 + 0 + 1.
    assert d.evidence["projected_overflow_step"] == 6


def test_overflow_names_the_pushing_step_and_the_marker() -> None:
    steps = [ctx(1, 1000), ctx(2, 2000), ctx(3, 31_000), ctx(4, 33_000)]
    d = context_bomb(run(steps, "context_overflow", model="qwen2.5-coder-32b"), T)
    assert d is not None and d.evidence["kind"] == "overflow" and d.first_step == 3
    assert d.evidence["pushing_tokens"] == 2000 and "step 3" in d.explanation


def _unknown(step: int) -> StepView:
    """A step whose context size is unknown (NULL), as a refused call or a source with no counts records."""
    return act(step, arg=f"f{step}", context_tokens=None)


@pytest.mark.parametrize("where", ["end", "middle", "everywhere after"])
def test_an_unknown_context_size_stays_unknown(where: str) -> None:
    # 20k tokens a step on a 200k window: near the window (0.9) at step 9, projected to overflow at step 11.
    measured = [ctx(i, 20_000 * i) for i in range(1, 10)]
    steps = {"end": [*measured, _unknown(10)],
             "middle": [*measured[:6], _unknown(7), _unknown(8), measured[8]],
             "everywhere after": [*measured, *(_unknown(i) for i in range(10, 16))]}[where]
    d = context_bomb(run(steps, model="claude-sonnet-4"), T)
    # Read as 0, the unknown steps would fake a fall: no projection, or no verdict at all.
    assert d is not None and d.evidence["kind"] == "near_window", where
    assert d.evidence["peak_context_tokens"] == 180_000 and d.evidence["peak_step"] == 9
    assert d.evidence["projected_overflow_step"] == 11
    # And unknown sizes never make a verdict: a run whose only large "sizes" are unknown has none.
    assert context_bomb(run([ctx(1, 1000), *(_unknown(i) for i in range(2, 30))], model="claude-sonnet-4"), T) is None


def test_a_large_result_on_a_run_that_ended_fine_is_not_the_primary_label() -> None:
    found = diagnose(run([ctx(1, 1000), ctx(2, 2000, obs_bytes=240_000)], model="claude-x"), T)
    assert [d.label for d in found] == ["ok", "context_bomb"]


def test_cap_hit_says_where_the_budget_went() -> None:
    steps = varied(3) + [act(4, arg="f0"), act(5, arg="f1"), act(6, tool="nope", is_error=True,
                                                                  error_type="tool_not_found")]
    d = cap_hit(run(steps, "max_iters"), T)
    assert d is not None and d.evidence == {"cap": "max_iters", "format": "run status", "where": "status",
                                            "actions": 6, "productive": 3, "repeated": 2, "error_recovery": 1}
    assert "step cap" in d.explanation
    assert cap_hit(run(steps, "ok"), T) is None
    assert cap_hit(run(varied(300), "ok"), T) is None  # a long run that stopped by itself hit no cap


def test_cap_from_an_end_marker_in_the_last_step() -> None:
    steps = [*varied(4), StepView(step=5, end_text="Max rounds (20) reached.")]
    d = cap_hit(run(steps, "ok"), T)
    assert d is not None and d.evidence["where"] == "step 5" and "Magentic-One" in d.explanation
    assert diagnose(run(steps, "ok"), T)[0].label == "cap_hit"
    early = [StepView(step=1, end_text="Max rounds (20) reached."), *varied(10)[1:]]
    assert cap_hit(run(early, "ok"), T) is None  # quoted early on, it is not how the run ended


def bad(step: int, kind: str = "tool_not_found") -> StepView:
    return act(step, tool="nope", is_error=True, error_type=kind)


@pytest.mark.parametrize(
    ("name", "r", "fires"),
    [
        ("half of the actions hallucinated", run(varied(3) + [bad(4), bad(5), bad(6)]), True),
        ("a third is not enough", run(varied(4) + [bad(5), bad(6)]), False),
        ("schema errors count too", run(varied(2) + [bad(3, "invalid_arguments"), bad(4, "invalid_arguments")]), True),
        ("one recovered unknown-tool call", run([bad(1)] + varied(5)[1:]), False),
        ("an unparseable action ends the run", run(varied(9) + [bad(10, "unparseable")], "error"), True),
        ("a format exit marker", run(varied(9), "error", error="exit status 'exit_format'"), True),
        ("ordinary tool errors are not hallucinations",
         run([act(i + 1, arg=f"x{i}", is_error=True, error_type="FileNotFoundError") for i in range(5)]), False),
    ],
)
def test_hallucinated_tool(name: str, r: RunView, fires: bool) -> None:
    assert (hallucinated_tool(r, T) is not None) == fires, name


@pytest.mark.parametrize(
    ("name", "r", "primary", "others"),
    [
        ("loop until the cap: stagnation first", run([act(i + 1, arg="x", obs="same") for i in range(30)],
                                                     "max_iters"), "stagnation", ["cap_hit"]),
        ("paging until the cap is the cap", run([act(i + 1, tool="scroll_down", arg="") for i in range(30)],
                                                "max_iters"), "cap_hit", []),
        ("the framework's loop detector", run([*varied(5), StepView(step=6, end_text="Agent got stuck in a loop")],
                                              "error"), "stagnation", ["error"]),
        ("plain cap", run(varied(30), "max_iters"), "cap_hit", []),
        ("overflow beats the loop", run([act(i + 1, arg="x", obs="same", context_tokens=50_000 * (i + 1))
                                         for i in range(5)], "context_overflow"), "context_bomb", ["stagnation"]),
        ("healthy run", run(varied(10)), "ok", []),
        ("an error nothing else explains", run(varied(3), "error"), "error", []),
        ("no end recorded", run(varied(3), "incomplete"), "incomplete", []),
    ],
)
def test_primary_is_the_root_cause(name: str, r: RunView, primary: str | None, others: list[str]) -> None:
    found = diagnose(r, T)
    assert (found[0].label if found else None) == primary, name
    assert [d.label for d in found[1:]] == others
    assert [d.is_primary for d in found] == ([True] + [False] * len(others) if primary else [])


def test_thresholds_come_from_a_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "looptrace.toml"
    path.write_text("[analyzer]\nrepeat_min = 6\ncontext_window = 128000\n")  # for models nobody knows
    t = load_thresholds(path, repeat_min=7, cycle_repeats=None)
    assert (t.repeat_min, t.context_window, t.cycle_repeats) == (7, 128_000, T.cycle_repeats)
    path.write_text("[analyzer]\nrepeat_minimum = 6\n")
    with pytest.raises(ValueError, match="unknown analyzer settings: repeat_minimum"):
        load_thresholds(path)
    path.write_text("[analyzer]\nrepeat_min = 'six'\n")
    with pytest.raises(ValueError, match="repeat_min"):
        load_thresholds(path)


# -- repeated failing calls: primary when the run ends in them, secondary when the agent recovered ------


def fail(step: int, arg: str = "missing.txt", err: str = "FileNotFoundError: missing.txt", **kw: object) -> StepView:
    return act(step, tool="read_file", arg=arg, obs=err, is_error=True, error_type="FileNotFoundError",
               tokens=800, cost_usd=0.0033, **kw)


def answer(step: int, text: str = "The deploy is on Friday.") -> StepView:
    return StepView(step=step, end_text=text)


@pytest.mark.parametrize(
    ("name", "r", "labels", "kind"),
    [
        ("3 identical failing calls, then recovered and answered",
         run([*varied(2), fail(3), fail(4), fail(5), act(6, arg="notes.txt"), answer(7)], "ok"),
         ["ok", "stagnation"], "failing"),
        ("the same tool, the same error, other arguments: recovered",
         run([fail(1, arg="a", err="Permission denied"), fail(2, arg="b", err="Permission denied"),
              fail(3, arg="c", err="Permission denied"), act(4, arg="d"), answer(5)], "ok"), ["ok", "stagnation"],
         "failing"),
        ("the run ends in 3 failing calls", run([*varied(2), fail(3), fail(4), fail(5)], "incomplete"),
         ["stagnation"], "failing"),
        ("2 failing calls are not a streak", run([*varied(2), fail(3), fail(4), act(5, arg="x"), answer(6)], "ok"),
         ["ok"], None),
        ("a new error each time is news",
         run([fail(i + 1, err=f"exit code {i}") for i in range(4)] + [answer(5)], "ok"), ["ok"], None),
        ("a cap the failing streak did not cause stays primary",
         run([*varied(2), fail(3), fail(4), fail(5), *varied(10)[5:]], "max_iters"), ["cap_hit", "stagnation"],
         "failing"),
        ("a long loop recovered from in a run that ended normally is secondary",
         run([act(i + 1, arg="x", obs="same") for i in range(6)] + [act(7, arg="y"), answer(8)], "ok"),
         ["ok", "stagnation"], "repeat"),
        ("a long loop in a run a cap stopped stays the root cause",
         run([act(i + 1, arg="x", obs="same") for i in range(6)] + varied(9)[7:], "max_iters"),
         ["stagnation", "cap_hit"], "repeat"),
    ],
)
def test_repeated_failing_calls(name: str, r: RunView, labels: list[str], kind: str | None) -> None:
    found = diagnose(r, T)
    assert [d.label for d in found] == labels, (name, found)
    stuck = [d for d in found if d.label == "stagnation"]
    assert [d.evidence["kind"] for d in stuck] == ([kind] if kind else [])


def test_a_recovered_failing_streak_names_its_steps_and_spend() -> None:
    [ok, stuck] = diagnose(run([*varied(5), fail(6), fail(7), fail(8), act(9, arg="notes.txt"), answer(10)], "ok"), T)
    assert (ok.label, ok.is_primary, stuck.is_primary) == ("ok", True, False)
    assert (stuck.first_step, stuck.last_step) == (6, 8)
    assert stuck.evidence | {"args": None} == {
        "kind": "failing", "repeats": 3, "tool": "read_file", "args": None, "same_args": True, "steps": [6, 7, 8],
        "calls": 3, "tokens": 2400, "cost_usd": pytest.approx(0.0099), "ends_run": False, "tripped_at": 8}
    assert stuck.explanation.startswith("3 identical failing calls of 'read_file' at steps 6-8")
    assert stuck.explanation.endswith("2,400 tokens and $0.0099 went on it. The agent recovered.")


@pytest.mark.parametrize(
    ("name", "r", "t", "primary"),
    [
        ("a group chat at the limit it records", run(varied(6), "incomplete", attributes='{"max_round": 6}'), T,
         "cap_hit"),
        ("a group chat at a configured limit", run(varied(6), "incomplete"), Thresholds(chat_round_limit=6), "cap_hit"),
        ("its message count matches the configured limit",
         run(varied(4), "incomplete", attributes='{"messages": 8}'), Thresholds(chat_round_limit=8), "cap_hit"),
        ("short of the configured limit", run(varied(5), "incomplete"), Thresholds(chat_round_limit=6), "incomplete"),
        ("at the limit but it said TERMINATE",
         run([*varied(5), StepView(step=6, end_text="Done. TERMINATE")], "incomplete"), Thresholds(chat_round_limit=6),
         "ok"),
        ("at the limit, success recorded", run(varied(6), "ok"), Thresholds(chat_round_limit=6), "ok"),
    ],
)
def test_a_chat_that_stops_at_its_round_limit(name: str, r: RunView, t: Thresholds, primary: str) -> None:
    assert diagnose(r, t)[0].label == primary, name
