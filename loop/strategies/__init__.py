"""Agent patterns from the literature as escalations over one worker ``Agent``.

Each strategy is a function that takes the worker (its model, tools, tracing and policy) and a
task, and returns a ``RunResult`` for a parent run whose ``strategy`` names the pattern. Attempts,
samples and plan steps are ordinary ReAct child runs (``runs.parent_run_id``), and the strategy's
own model calls are steps of the parent, so the whole tree, with its cost, is in the store:

    SELECT run_id, parent_run_id, strategy, status, cost_usd FROM runs ORDER BY started_at

The strategies are independent of each other; they share only ``_common``.
"""

from __future__ import annotations

from ._common import parse_plan
from .plan_execute import PLAN_PREFIX, PLANNER_SYSTEM, REPLAN_PREFIX, plan_and_execute
from .reflexion import REFLECT_PREFIX, Check, reflexion
from .self_consistency import self_consistency, vote
from .tree_of_thoughts import PROPOSE_PREFIX, SCORE_PREFIX, parse_scores, tree_of_thoughts

__all__ = [
    "PLANNER_SYSTEM",
    "PLAN_PREFIX",
    "PROPOSE_PREFIX",
    "REFLECT_PREFIX",
    "REPLAN_PREFIX",
    "SCORE_PREFIX",
    "Check",
    "parse_plan",
    "parse_scores",
    "plan_and_execute",
    "reflexion",
    "self_consistency",
    "tree_of_thoughts",
    "vote",
]
