"""What a run still going is doing wrong right now: "same call 4x since step 12" beside ``running``.

A running run (a preview `looptrace collect` holds open) has no diagnosis yet: the analyzer waits for
its end. The stagnation rule is a function of the steps so far, though, so the runs table asks it, for
the running runs on the page, whether the run is inside a streak now (the streak reaches its last
step): the same rule, thresholds and reading as ``looptrace analyze`` and ``collect --alert``.
"""

from __future__ import annotations

from collections.abc import Sequence

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import duckdb

    from looptrace.tracer.rules import Thresholds

__all__ = ["live_findings", "describe", "MAX_LIVE_RUNS"]

MAX_LIVE_RUNS = 20  # running runs looked at per page: each is one pass of the rule over its steps

_WORDS = {"repeat": "same call", "failing": "same failure", "same_observation": "same answer"}


def describe(evidence: dict[str, object]) -> str:
    kind, repeats = str(evidence.get("kind")), evidence.get("repeats")
    steps = evidence.get("steps") or []
    since = f" since step {steps[0]}" if isinstance(steps, list) and steps else ""
    if kind == "cycle":
        return f"cycle of {evidence.get('period')} {repeats}x{since}"
    return f"{_WORDS.get(kind, kind)} {repeats}x{since}"


def live_findings(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str],
                  t: Thresholds | None = None) -> dict[str, str]:
    """For each of ``run_ids`` inside a streak now, the streak in a few words. The analyzer is imported
    here, when a page has a running run: the viewer's start-up does not pay for it."""
    from looptrace.replay.analyzer.analyze import load_runs
    from looptrace.replay.analyzer.stagnation import stagnation
    from looptrace.tracer.rules import DEFAULT_THRESHOLDS

    t = t or DEFAULT_THRESHOLDS
    out = {}
    for run in load_runs(conn, list(run_ids)[:MAX_LIVE_RUNS]):
        found = stagnation(run, t)
        if found is not None and found.evidence.get("ends_run") and found.evidence.get("kind") != "marker":
            out[run.run_id] = describe(found.evidence)
    return out
