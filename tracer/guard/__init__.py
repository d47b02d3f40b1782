"""Guards: limits enforced on an agent's run while it runs, before each model request.

``Guard`` holds the limits and the action taken when one trips; ``GuardTripped`` is raised into the
agent's code and carries the ``Finding`` (rule, run, evidence steps, spend). The evaluation is pure
(``state.RunGuard``: facts of finished steps in, a finding out) so the instrumentors, the manual API
and ``looptrace collect --alert`` all run the same rules; ``spans/guarding.py`` attaches it to runs.
"""

from __future__ import annotations

from .facts import Call, step_acts
from .limits import ACTIONS, REFLECTION, Finding, Guard, GuardTripped
from .state import RunGuard

__all__ = ["Guard", "GuardTripped", "Finding", "ACTIONS", "REFLECTION", "RunGuard", "Call", "step_acts"]
