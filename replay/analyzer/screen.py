"""The column screen: which runs no failure rule can fire on, decided over the whole store at once.

Most runs of a store end normally and repeat nothing; turning every one of their steps into a Python
object only to find that out was most of ``looptrace analyze``. So one SQL pass (``SCREEN_SQL``)
reads the columns the rules read, for every run at once, and gives each run a few facts
(``RunFacts``): the column tests of the repeat rules (``looptrace.tracer.rules.columns``), its
largest observation and context, its hallucination errors, whether every action has its stored key.
Each failure rule has a column form beside its definition (``may_trip``, ``context.may_bomb``,
``rules.may_cap``, and any hallucination error for ``hallucinated_tool``), true wherever the rule
could fire: never exact, only a superset. A rule whose test does not hold is cleared for the run
(``clears``) unless an end marker names its label (``cleared``: the markers live in the run's last
steps' texts, checked on those rows); ``diagnose`` does not evaluate a cleared rule, and a run
cleared of every failure rule is not even fetched whole.

What is left of a cleared run's verdict is how it ended (``ending.run_end``), and that reads only
the run's first step, the step of its last action and its last ``TAIL_STEPS`` steps:
``PICKED_ROWS_SQL`` fetches just those rows for a cleared run and every row of the others, which
``diagnose`` evaluates in full. tests/test_analyzer_screen.py proves the two evaluations give the
same diagnoses, evidence included, on the shared corpus and on generated stores.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from looptrace.tracer.records.actions import NEAR_OBSERVATION_KEY_SQL, PROGRESS_KEY_SQL
from looptrace.tracer.rules import (ACTS_WINDOW_SQL, MAY_TRIP_AGGREGATES_SQL, MAY_TRIP_SHORT_SQL, MAY_TRIP_SQL,
                                    SHORT_CYCLES, Thresholds, Trips, may_trip, trip_parameters)

from .context import may_bomb
from .guarded import guarded_thresholds
from .markers import STATUS_MARKERS, TAIL_STEPS
from .rules import HALLUCINATION_ERRORS, may_cap
from .views import RunView

__all__ = ["SCREEN_SQL", "PICKED_ROWS_SQL", "RunFacts", "screen", "clears", "cleared"]

# One row per run with steps. The outcome is the one the rules compare (``stagnation.acts_of``):
# the near-same key for an observation of at least ``near_same_min_bytes``, else the progress key,
# each computed from the observation when the row was stored without it (as STEPS_SQL does).
_SCREEN_TEMPLATE = """
SELECT run_id, min(step) AS first_step, max(step) AS last_step,
       max(step) FILTER (WHERE tool IS NOT NULL) AS last_action_step, count(*) FILTER (WHERE unkeyed) AS unkeyed,
       count(*) FILTER (WHERE bad) AS hallucination_errors, max(observation_bytes) AS max_bytes,
       max(context_tokens) FILTER (WHERE context_tokens <> 0) AS max_context, {aggregates}
FROM (
    SELECT run_id, step, tool, unkeyed, bad, observation_bytes, context_tokens, {tests}
    FROM (
        -- only numbers and flags go through the window's sort (and the run id it partitions by)
        SELECT run_id, step, call_index, CASE WHEN tool IS NOT NULL THEN 1 END AS tool,
               tool IS NOT NULL AND action_key IS NULL AS unkeyed,
               list_contains($hallucination_errors::VARCHAR[], error_type) AS bad,
               observation_bytes, context_tokens, hash(action_key) AS a, hash(tool) AS th, is_error::INTEGER AS e,
               CASE WHEN outcome IS NOT NULL THEN hash(outcome) END AS oh, hash(action_key, outcome, is_error) AS kh
        FROM (
            SELECT run_id, step, call_index, tool, action_key, error_type,
                   coalesce(observation_bytes, 0) AS observation_bytes, context_tokens,
                   coalesce(is_error, false) AS is_error,
                   CASE WHEN coalesce(near_key, {near_key}) IS NOT NULL AND coalesce(observation_bytes, 0) >= $near_min
                        THEN coalesce(near_key, {near_key}) ELSE coalesce(progress_key, {progress_key}) END AS outcome
            FROM steps
        )
    )
    WINDOW {window}
)
GROUP BY run_id
""".replace("{aggregates}", MAY_TRIP_AGGREGATES_SQL).replace("{window}", ACTS_WINDOW_SQL).replace(
    "{near_key}", NEAR_OBSERVATION_KEY_SQL).replace("{progress_key}", PROGRESS_KEY_SQL)
SCREEN_SQL = _SCREEN_TEMPLATE.replace("{tests}", MAY_TRIP_SQL)
# The default cycle_max_period needs no moving frame (columns.MAY_TRIP_SHORT_SQL).
_SCREEN_SHORT_SQL = _SCREEN_TEMPLATE.replace("{tests}", MAY_TRIP_SHORT_SQL)

# STEPS_SQL's filter (analyze.py): every row of a run to evaluate in full (``whole``), and of a
# cleared run the rows ``ending.run_end`` reads: its first step, the step of its last action (an end
# tool may be called before the closing steps) and its last TAIL_STEPS steps (``_final``, the crash
# and marker search of ``end_texts``). The lists are unnested in lockstep, one entry per run.
PICKED_ROWS_SQL = f"""
JOIN (SELECT unnest(?::VARCHAR[]) AS run_id, unnest(?::BOOLEAN[]) AS whole, unnest(?::INTEGER[]) AS first_step,
             unnest(?::INTEGER[]) AS last_step, unnest(?::INTEGER[]) AS last_action_step) AS picked USING (run_id)
WHERE picked.whole OR step > picked.last_step - {TAIL_STEPS} OR step = picked.first_step
      OR step = picked.last_action_step
"""


@dataclass(frozen=True)
class RunFacts:
    """One run's columns, as ``SCREEN_SQL`` reduced them."""

    first_step: int
    last_step: int
    last_action_step: int | None
    unkeyed: int  # actions stored without an action key (the SQL cannot compare them as the rules do)
    hallucination_errors: int
    max_bytes: int
    max_context: int | None
    trips: Trips


def screen(conn: duckdb.DuckDBPyConnection, t: Thresholds) -> dict[str, RunFacts]:
    """Every run's facts (runs with no steps have none), in one pass over the store."""
    params = {**trip_parameters(t), "near_min": t.near_same_min_bytes,
              "hallucination_errors": sorted(HALLUCINATION_ERRORS)}
    return {run_id: RunFacts(first, last, last_action, unkeyed, bad, max_bytes, max_context,
                             Trips(repeat, same, fail, cycle_acts, repeated))
            for run_id, first, last, last_action, unkeyed, bad, max_bytes, max_context, repeat, same, fail, cycle_acts,
            repeated in conn.execute(_SCREEN_SHORT_SQL if t.cycle_max_period <= SHORT_CYCLES else SCREEN_SQL,
                                     params).fetchall()}


def clears(head: RunView, facts: RunFacts, t: Thresholds) -> frozenset[str]:
    """The failure labels (``rules.FAILURE_LABELS``) whose rule cannot fire on the run as far as its
    columns tell: its end markers aside (``cleared``). ``head`` is the run without its steps: what
    the rules read of the run itself (status, model, attributes)."""
    out = []
    # The SQL ran with ``t``: a guard's lower repeat thresholds (guarded.py) are the rule's to apply.
    if not (facts.unkeyed or guarded_thresholds(head, t) != t or may_trip(facts.trips, t)):
        out.append("stagnation")
    if not may_bomb(head, facts.max_bytes, facts.max_context, t):
        out.append("context_bomb")
    if not may_cap(head, t):
        out.append("cap_hit")
    if not facts.hallucination_errors:
        out.append("hallucinated_tool")
    # A status marker (a cap, an overflow, a stall) is known before any row is read: that run is
    # fetched whole at once rather than found out on its picked rows.
    return frozenset(out) - {STATUS_MARKERS.get(head.status)}


def cleared(run: RunView, by_columns: frozenset[str]) -> frozenset[str]:
    """``by_columns`` less the labels of the run's end markers (its status included): a marker makes
    its rule fire. ``run`` holds at least its picked rows, so its end texts are the whole run's."""
    return by_columns - {m.label for m in run.markers}
