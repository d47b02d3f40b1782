"""The rules every part of looptrace applies to an agent's calls, defined once.

Three users read them: the analyzer (``looptrace analyze``, over a stored run), looptrace's own loop
(its stop on stagnation) and a live guard (fed one call at a time while an agent runs). The tracer
cannot import the analyzer (the layers are tracer < loop < replay < viewer), so the definitions live
here, just above ``records``, as pure functions over plain data:

- ``Thresholds`` (every named threshold, ``DEFAULT_THRESHOLDS``, ``load_thresholds`` from TOML);
- the repeat rules (``repeat``, ``failing``, ``cycle``, ``same_observation``; ``repeats.py`` says
  each) evaluated two ways that agree: ``repeat_findings(acts, t)`` over a whole run, and
  ``RepeatWatch(t).add(...)`` one call at a time, returning a ``Finding`` the moment a streak trips;
- and their column form (``columns.py``): SQL tests over every act of a store at once that are true
  wherever a rule could trip, so the analyzer evaluates the rules only on the runs that may trip.

    from looptrace.tracer.rules import RepeatWatch, Thresholds, outcome_key
    t = Thresholds(repeat_min=3)
    watch = RepeatWatch(t)
    found = watch.add(step, call_key(tool, args), outcome_key(observation, t), is_error, tool=tool)

Names are imported on first use (``looptrace.tracer.lazy``): ``looptrace analyze --help`` reads the
default thresholds and should not pay for more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from looptrace.tracer.lazy import lazy_exports

if TYPE_CHECKING:
    from .columns import (ACTS_WINDOW_SQL, MAY_TRIP_AGGREGATES_SQL, MAY_TRIP_SHORT_SQL, MAY_TRIP_SQL, SHORT_CYCLES, Trips,
                          may_trip, trip_parameters)
    from .findings import RULES, Act, Finding, outcome_key
    from .repeats import repeat_findings
    from .thresholds import DEFAULT_THRESHOLDS, Thresholds, load_thresholds
    from .watch import RepeatWatch

__all__ = ["Thresholds", "DEFAULT_THRESHOLDS", "load_thresholds", "Act", "Finding", "RULES", "outcome_key",
           "repeat_findings", "RepeatWatch", "ACTS_WINDOW_SQL", "MAY_TRIP_SQL", "MAY_TRIP_SHORT_SQL", "SHORT_CYCLES",
           "MAY_TRIP_AGGREGATES_SQL", "Trips", "may_trip", "trip_parameters"]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("Thresholds", "DEFAULT_THRESHOLDS", "load_thresholds"), ".thresholds"),
    **dict.fromkeys(("RULES", "Act", "Finding", "outcome_key"), ".findings"),
    "repeat_findings": ".repeats",
    "RepeatWatch": ".watch",
    **dict.fromkeys(("ACTS_WINDOW_SQL", "MAY_TRIP_SQL", "MAY_TRIP_SHORT_SQL", "SHORT_CYCLES", "MAY_TRIP_AGGREGATES_SQL",
                     "Trips", "may_trip", "trip_parameters"), ".columns"),
})
