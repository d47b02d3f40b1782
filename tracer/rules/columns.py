"""The repeat rules over columns: which runs of a whole store MAY hold a streak, in one SQL pass.

``repeats.py`` defines each rule over one run's acts; a store holds millions of them, and turning
each into a Python object to learn that most runs repeat nothing was most of ``looptrace analyze``.
So each rule also has a column form, the way pyiceberg evaluates one row filter against a row and
against a file's statistics: a test that is true of every act where the rule's streak could reach
its threshold (a superset, never an exact count), computed by window functions over the acts of
every run at once. A run where no test holds cannot trip the rule; a run where one holds is
evaluated by the rule itself, so a loose test costs time, never a different verdict.

- ``repeat`` needs ``repeat_min`` equal actions in a row: the act equals the one before it and the
  one ``repeat_min - 1`` before it. And every call of the streak that counts as no progress but its
  first repeats an earlier call of the streak exactly (action, outcome, failure), so among the acts
  that are in a streak of equal actions (equal to the act before or after) at least
  ``repeat_min - 1`` equal an earlier one (``repeated_acts``: those acts less their distinct values,
  a hash aggregate over the few acts in streaks, no sort). An action repeated while its results keep
  changing is progress, and cleared here.
- ``same_observation`` needs ``same_observation_min`` equal (non-null) outcomes in a row: likewise.
- ``failing`` needs ``fail_repeat_min`` failed calls of one tool in a row, each with the outcome of
  the one before: the act, the one before and the one ``fail_repeat_min - 1`` before failed, with
  one tool, and its outcome is the one before's.
- ``cycle`` of period p (2..``cycle_max_period``) over ``cycle_repeats`` rounds has at least
  ``p * (cycle_repeats - 1)`` acts equal (action, outcome, failure) to the act p before them: so a
  run needs at least ``2 * (cycle_repeats - 1)`` acts equal to one 2..``cycle_max_period`` before.

The relation the SQL reads has, per act (a row with ``tool`` not null), hashes of its identities:
``a`` (action key), ``oh`` (outcome key, NULL when there is none), ``th`` (tool), ``kh`` (action,
outcome and failure together) and ``e`` (1 when it failed). A hash collision can only make two
different values look equal, which makes a test true more often: the safe direction. Rows that are
not acts sort after the acts of their run (``ACTS_WINDOW_SQL``), so an act's neighbours are acts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .thresholds import Thresholds

__all__ = ["ACTS_WINDOW_SQL", "MAY_TRIP_SQL", "MAY_TRIP_SHORT_SQL", "SHORT_CYCLES", "MAY_TRIP_AGGREGATES_SQL", "Trips",
           "may_trip", "trip_parameters"]

ACTS_WINDOW_SQL = "acts AS (PARTITION BY run_id ORDER BY tool IS NULL, step, call_index)"
"""The window the tests read (``WINDOW`` clause): each run's acts in the order they were made."""

MAY_TRIP_SQL = """
    tool IS NOT NULL AND a = lag(a) OVER acts AND a = lag(a, $repeat_lag) OVER acts AS may_repeat,
    tool IS NOT NULL AND oh = lag(oh) OVER acts AND oh = lag(oh, $same_lag) OVER acts AS may_same,
    tool IS NOT NULL AND e = 1 AND lag(e) OVER acts = 1 AND lag(e, $fail_lag) OVER acts = 1
        AND th = lag(th) OVER acts AND th = lag(th, $fail_lag) OVER acts
        AND oh IS NOT DISTINCT FROM lag(oh) OVER acts AS may_fail,
    tool IS NOT NULL AND list_contains(list(kh) OVER (acts ROWS BETWEEN $cycle_far PRECEDING AND 2 PRECEDING), kh)
        AS may_cycle,
    CASE WHEN tool IS NOT NULL AND (a = lag(a) OVER acts OR a = lead(a) OVER acts) THEN kh END AS streak_kh"""
"""Per row: the four tests (select-list items over the relation described above)."""

SHORT_CYCLES = 3
"""The longest ``cycle_max_period`` (the default) that ``MAY_TRIP_SHORT_SQL`` serves."""

MAY_TRIP_SHORT_SQL = MAY_TRIP_SQL.replace(
    "list_contains(list(kh) OVER (acts ROWS BETWEEN $cycle_far PRECEDING AND 2 PRECEDING), kh)",
    "(kh = lag(kh, 2) OVER acts OR ($cycle_far >= 3 AND kh = lag(kh, 3) OVER acts))")
"""``MAY_TRIP_SQL`` for a ``cycle_max_period`` of at most ``SHORT_CYCLES``: the same cycle test as two
lags instead of a list over a moving frame, which cost ~15% of the screen's CPU."""

MAY_TRIP_AGGREGATES_SQL = """
    coalesce(bool_or(may_repeat), false) AS may_repeat, coalesce(bool_or(may_same), false) AS may_same,
    coalesce(bool_or(may_fail), false) AS may_fail, count(*) FILTER (WHERE may_cycle) AS cycle_acts,
    coalesce(len(list(streak_kh) FILTER (WHERE streak_kh IS NOT NULL))
             - len(list_distinct(list(streak_kh) FILTER (WHERE streak_kh IS NOT NULL))), 0) AS repeated_acts"""
"""Per run (``GROUP BY run_id``): the columns ``Trips`` holds."""


@dataclass(frozen=True)
class Trips:
    """A run's column tests (``MAY_TRIP_AGGREGATES_SQL``)."""

    may_repeat: bool
    may_same: bool
    may_fail: bool
    cycle_acts: int
    repeated_acts: int  # acts in streaks whose (action, outcome, failure) an earlier such act had


def trip_parameters(t: Thresholds) -> dict[str, Any]:
    """The SQL's parameters for ``t`` (a threshold below 2 turns its rule off; the SQL stays valid)."""
    return {"repeat_lag": max(1, t.repeat_min - 1), "same_lag": max(1, t.same_observation_min - 1),
            "fail_lag": max(1, t.fail_repeat_min - 1), "cycle_far": max(2, t.cycle_max_period)}


def may_trip(trips: Trips, t: Thresholds) -> bool:
    """False only when no repeat rule can find a streak in the run (evaluated with ``t``, the
    thresholds ``trip_parameters`` was given)."""
    return ((t.repeat_min >= 2 and trips.may_repeat and trips.repeated_acts >= t.repeat_min - 1)
            or (t.same_observation_min >= 2 and trips.may_same)
            or (t.fail_repeat_min >= 2 and trips.may_fail)
            or (t.cycle_repeats >= 2 and t.cycle_max_period >= 2 and trips.cycle_acts >= 2 * (t.cycle_repeats - 1)))
