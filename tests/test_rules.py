"""The rules layer: the repeat rules over a whole run and one call at a time find the same streaks.

``repeat_findings`` (batch, what the analyzer runs) and ``RepeatWatch`` (incremental, what the loop
and a live guard run) are two evaluations of one definition; they must agree on every run: on runs
built inline, on seeded random runs, and on every run of the shared corpus read back from a real
DuckDB store. A live caller computes the outcome key from the observation text (``outcome_key``); the
analyzer reads the keys the sink stored: they must be the same key.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from looptrace.replay.analyzer import diagnose, load_runs
from looptrace.replay.analyzer.stagnation import acts_of
from looptrace.tracer.ingest.files.importing import import_paths, write_trajectories
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
from looptrace.tracer.records.actions import call_key
from looptrace.tracer.rules import (
    DEFAULT_THRESHOLDS, RULES, Act, Finding, RepeatWatch, Thresholds, outcome_key, repeat_findings,
)
from looptrace.tracer.store import Store

from .conftest import SHARED

T3 = Thresholds(repeat_min=3, fail_repeat_min=3, cycle_repeats=2, same_observation_min=3)


def acts(spec: str, *, errors: str = "", outcomes: str | None = None) -> list[Act]:
    """One act per letter: the letter is the action, ``outcomes`` (same length) what came back (default:
    the action's letter, i.e. the same result each time), ``errors`` the letters of failed positions
    ("x" fails, anything else succeeds). Every act has 100 tokens and $0.01."""
    outs = outcomes or spec
    return [Act(i + 1, a, None if outs[i] == "-" else outs[i], errors[i:i + 1] == "x", f"tool-{a}", 100, 0.01, 200)
            for i, a in enumerate(spec)]


def assert_agree(run: Sequence[Act], t: Thresholds) -> list[Finding]:
    """The watch fed ``run`` call by call ends with the batch's findings, and each appeared on the call
    that brought it to its threshold (``tripped_at``), returned by ``add`` then (the first of RULES
    when several trip on one call)."""
    batch = repeat_findings(run, t)
    w = RepeatWatch(t)
    seen: set[tuple[str, int]] = set()
    for a in run:
        returned = w.add_act(a)
        new = [f for f in w.findings if (f.rule, f.start) not in seen]
        seen |= {(f.rule, f.start) for f in new}
        assert all(f.tripped_at == a.step for f in new)
        if new:
            first = min(new, key=lambda f: RULES.index(f.rule))
            assert returned == first and returned.last_step == a.step
        else:
            assert returned is None
    assert w.findings == batch
    return batch


CASES = [
    # name, run, thresholds, [(rule, first step, calls, tripped at)]
    ("nothing repeats", acts("abcdefg"), T3, []),
    ("one action 3x, same result", acts("xaaay"), T3, [("repeat", 2, 3, 4)]),
    ("one action 5x, results new each time (paging)", acts("aaaaa", outcomes="12345"), T3, []),
    ("one action, results flip between two", acts("aaaa", outcomes="1212"), T3, [("repeat", 1, 4, 4)]),
    ("same tool failing 3x, same error, args change",
     [Act(i + 1, f"read-{i}", "no such file", True, "read") for i in range(3)], T3, [("failing", 1, 3, 3)]),
    ("same call failing 3x with a new error each time is news",
     [Act(i + 1, "run", f"exit {i}", True, "run") for i in range(3)], T3, []),
    ("same call, same error, 4x: both rules", acts("aaaa", errors="xxxx"), T3,
     [("repeat", 1, 4, 3), ("failing", 1, 4, 3)]),
    ("failing streak broken by a success", acts("aaxa", errors="xx-x", outcomes="eeoe"), T3, []),
    ("cycle of 2 twice round", acts("zabab"), T3, [("cycle", 2, 4, 5)]),
    ("cycle of 3 twice round, then broken", acts("abcabcd"), T3, [("cycle", 1, 6, 6)]),
    ("cycle with new results is work", acts("abab", outcomes="1234"), T3, []),
    ("different actions, one answer", acts("abcd", outcomes="ssss"), T3, [("same_observation", 1, 4, 3)]),
    ("an error answer is not 'the same information'", acts("abc", errors="xxx", outcomes="sss"), T3, []),
    ("defaults: 4 repeats are not 5", acts("aaaa"), DEFAULT_THRESHOLDS, []),
    ("defaults: 5 repeats", acts("aaaaab"), DEFAULT_THRESHOLDS, [("repeat", 1, 5, 5)]),
    ("two streaks, both reported", acts("aaabccc"), T3, [("repeat", 1, 3, 3), ("repeat", 5, 3, 7)]),
    ("thresholds below 2 turn a rule off", acts("aaaa", errors="xxxx"),
     Thresholds(repeat_min=0, fail_repeat_min=1, cycle_repeats=0, same_observation_min=0), []),
]


@pytest.mark.parametrize(("name", "run", "t", "expected"), CASES, ids=[c[0] for c in CASES])
def test_batch_and_incremental_agree(name: str, run: list[Act], t: Thresholds,
                                     expected: list[tuple[str, int, int, int]]) -> None:
    found = assert_agree(run, t)
    assert [(f.rule, f.first_step, f.calls, f.tripped_at) for f in found] == expected, name


def test_a_finding_carries_its_steps_spend_and_message() -> None:
    run = [Act(5 + i, "read-x", "FileNotFoundError: x", True, "read_file", 800, 0.0033) for i in range(3)]
    [f] = repeat_findings(run, Thresholds(repeat_min=9))
    assert (f.rule, f.steps, f.tokens, round(f.cost_usd or 0, 4)) == ("failing", (5, 6, 7), 2400, 0.0099)
    assert f.message == "'read_file' failed 3 times in a row with the same error, at steps 5-7 (2,400 tokens, $0.0099)"
    unknown = [a._replace(tokens=None, cost_usd=None) for a in run]
    assert repeat_findings(unknown, Thresholds(repeat_min=9))[0].tokens is None


def test_current_is_the_streak_still_going() -> None:
    w = RepeatWatch(T3)
    for a in acts("aaa"):
        w.add_act(a)
    assert w.current() is not None and w.current().calls == 3  # type: ignore[union-attr]
    w.add_act(Act(4, "b", "b"))
    assert w.current() is None and len(w.findings) == 1


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_agree(seed: int) -> None:
    """Small alphabets make every rule fire often, on every boundary."""
    rng = random.Random(seed)
    n = rng.randint(0, 60)
    steps = [1]
    for _ in range(n - 1):
        steps.append(steps[-1] + rng.choice((0, 1, 1)))  # some steps make parallel calls
    run = [Act(steps[i], rng.choice("aabc"), rng.choice(("1", "1", "2", None)), rng.random() < 0.4,
               rng.choice(("t", "u")), rng.choice((None, 10)), None, rng.choice((0, 100))) for i in range(n)]
    for t in (T3, DEFAULT_THRESHOLDS, Thresholds(repeat_min=2, fail_repeat_min=2, cycle_repeats=3,
                                                 cycle_max_period=4, same_observation_min=2)):
        assert_agree(run, t)


def test_live_outcome_keys_are_the_stored_keys(tmp_path: Path) -> None:
    """A guard keys what it just saw with ``outcome_key``; the analyzer reads what the sink stored."""
    short = "cat: notes.txt: No such file or directory (at 2026-01-02T10:00:00Z)"
    long = "\n".join(f"{i}: line of a long file view, {i * 7} bytes" for i in range(60))
    obs = [short, short.replace("10:00:00", "10:00:07"), long, long.replace("line", "line", 1) + "\n61: more", None]
    store = Store(tmp_path / "s.duckdb")
    write_trajectories(store, [Trajectory(source="t.json", agent="a", status="ok", steps=[
        ImportedStep(step=i + 1, tool="cat", args={"path": "notes.txt"}, observation=o, is_error=i < 2)
        for i, o in enumerate(obs)])])
    with store.reader(locked_down=False) as conn:
        [run] = list(load_runs(conn))
    stored = acts_of([s for s in run.steps if s.tool], DEFAULT_THRESHOLDS.near_same_min_bytes)
    live = [Act(i + 1, call_key("cat", {"path": "notes.txt"}), outcome_key(o, DEFAULT_THRESHOLDS), i < 2, "cat")
            for i, o in enumerate(obs)]
    assert [(a.action, a.outcome, a.is_error) for a in stored] == [(a.action, a.outcome, a.is_error) for a in live]
    assert stored[0].outcome == stored[1].outcome  # the clock reading is masked


CORPUS = SHARED / "corpora"


@pytest.mark.slow
@pytest.mark.skipif(not (CORPUS / "labels.csv").exists(), reason="no corpus")
def test_every_corpus_run_agrees(tmp_path: Path) -> None:
    store = Store(tmp_path / "corpus.duckdb")
    import_paths(store, [CORPUS])
    with store.reader(locked_down=False) as conn:
        runs = list(load_runs(conn))
    assert len(runs) >= 543
    fired = 0
    for run in runs:
        for t in (DEFAULT_THRESHOLDS, T3):
            run_acts = acts_of([s for s in run.steps if s.tool is not None], t.near_same_min_bytes)
            found = assert_agree(run_acts, t)
            fired += bool(found)
            # What `analyze` says of the stored run is one of the streaks the watch found, and it says
            # nothing of a stagnation the watch did not find (but a framework's own loop marker).
            [stuck] = [d for d in diagnose(run, t) if d.label == "stagnation"] or [None]
            if stuck is None or stuck.evidence["kind"] == "marker":
                assert stuck is not None or not found
            else:
                assert (stuck.first_step, stuck.last_step) in {(f.first_step, f.last_step) for f in found}
    assert fired > 100  # the agreement is not the trivial one of finding nothing
