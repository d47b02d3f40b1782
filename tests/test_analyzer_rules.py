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
        ("same action 5 times", varied(2) + [act(3 + i, arg="x") for i in range(5)], True, "repeat"),
        ("same action 4 times only", varied(2) + [act(3 + i, arg="x") for i in range(4)], False, None),
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
    d = stagnation(run(varied(3) + [act(4 + i, arg="x") for i in range(6)] + varied(2)), T)
    assert d is not None and (d.first_step, d.last_step) == (4, 9) and d.evidence["repeats"] == 6


def ctx(step: int, tokens: int, obs_bytes: int = 400) -> StepView:
    return act(step, arg=f"f{step}", context_tokens=tokens, obs_bytes=obs_bytes)


@pytest.mark.parametrize(
    ("name", "r", "kind"),
    [
        ("provider refused the prompt", run([ctx(1, 1000), ctx(2, 150_000)], "context_overflow"), "overflow"),
        ("error text says prompt too long", run([ctx(1, 10)], "error", error="400: prompt is too long: 201000"),
         "overflow"),
        ("one observation of 60k tokens", run([ctx(1, 1000), ctx(2, 2000, obs_bytes=240_000)]), "observation"),
        ("context near the window", run([ctx(i + 1, 40_000 * (i + 1)) for i in range(5)]), "near_window"),
        ("window depends on the model", run([ctx(1, 120_000)], model="gpt-4o-2024-08-06"), "near_window"),
        ("window from the model's name", run([ctx(1, 120_000)], model="doubao-pro-128k"), "near_window"),
        ("healthy growth", run([ctx(i + 1, 1000 * (i + 1)) for i in range(20)]), None),
    ],
)
def test_context_bomb(name: str, r: RunView, kind: str | None) -> None:
    d = context_bomb(r, T)
    assert (d.evidence["kind"] if d else None) == kind, name


def test_context_bomb_projects_the_overflow_step() -> None:
    d = context_bomb(run([ctx(i + 1, 40_000 * (i + 1)) for i in range(5)]), T)
    assert d is not None
    # 40k tokens a step from 200k at step 5: the window is reached at step 5 + 0 + 1.
    assert d.evidence["projected_overflow_step"] == 6
    assert d.evidence["peak_step"] == 5 and d.first_step == 5


def test_cap_hit_says_where_the_budget_went() -> None:
    steps = varied(3) + [act(4, arg="f0"), act(5, arg="f1"), act(6, tool="nope", is_error=True,
                                                                  error_type="tool_not_found")]
    d = cap_hit(run(steps, "max_iters"), T)
    assert d is not None and d.evidence == {"cap": "max_iters", "actions": 6, "productive": 3, "repeated": 2,
                                            "error_recovery": 1}
    assert cap_hit(run(steps, "ok"), T) is None


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
        ("ordinary tool errors are not hallucinations",
         run([act(i + 1, arg=f"x{i}", is_error=True, error_type="FileNotFoundError") for i in range(5)]), False),
    ],
)
def test_hallucinated_tool(name: str, r: RunView, fires: bool) -> None:
    assert (hallucinated_tool(r, T) is not None) == fires, name


@pytest.mark.parametrize(
    ("name", "r", "primary", "others"),
    [
        ("loop until the cap: stagnation first", run([act(i + 1, arg="x") for i in range(30)], "max_iters"),
         "stagnation", ["cap_hit"]),
        ("plain cap", run(varied(30), "max_iters"), "cap_hit", []),
        ("overflow beats the loop", run([act(i + 1, arg="x", context_tokens=50_000 * (i + 1)) for i in range(5)],
                                        "context_overflow"), "context_bomb", ["stagnation"]),
        ("healthy run", run(varied(10)), "ok", []),
        ("an error nothing explains", run(varied(3), "error"), None, []),
    ],
)
def test_primary_is_the_root_cause(name: str, r: RunView, primary: str | None, others: list[str]) -> None:
    found = diagnose(r, T)
    assert (found[0].label if found else None) == primary, name
    assert [d.label for d in found[1:]] == others
    assert [d.is_primary for d in found] == ([True] + [False] * len(others) if primary else [])


def test_thresholds_come_from_a_file_then_overrides(tmp_path: Path) -> None:
    path = tmp_path / "looptrace.toml"
    path.write_text("[analyzer]\nrepeat_min = 6\ncontext_window = 128000\n")
    t = load_thresholds(path, repeat_min=7, cycle_repeats=None)
    assert (t.repeat_min, t.context_window, t.cycle_repeats) == (7, 128_000, T.cycle_repeats)
    path.write_text("[analyzer]\nrepeat_minimum = 6\n")
    with pytest.raises(ValueError, match="unknown analyzer settings: repeat_minimum"):
        load_thresholds(path)
    path.write_text("[analyzer]\nrepeat_min = 'six'\n")
    with pytest.raises(ValueError, match="repeat_min"):
        load_thresholds(path)
