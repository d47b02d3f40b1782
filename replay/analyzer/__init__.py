"""The failure analyzer: stagnation, context bombs, cap hits and hallucinated tool calls, with evidence.

Names are imported on first use (``looptrace.tracer.lazy``): ``looptrace analyze --help`` reads the
default thresholds, and must not load the store and its readers to do it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from looptrace.tracer.lazy import lazy_exports

if TYPE_CHECKING:
    from .analyze import RunDiagnoses, analyze_store, load_runs
    from .rules import LABELS, Diagnosis, RunView, StepView, diagnose
    from .thresholds import DEFAULT_THRESHOLDS, Thresholds, load_thresholds

__all__ = [
    "analyze_store", "load_runs", "RunDiagnoses", "diagnose", "Diagnosis", "RunView", "StepView", "LABELS",
    "Thresholds", "DEFAULT_THRESHOLDS", "load_thresholds",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("RunDiagnoses", "analyze_store", "load_runs"), ".analyze"),
    **dict.fromkeys(("LABELS", "Diagnosis", "RunView", "StepView", "diagnose"), ".rules"),
    **dict.fromkeys(("DEFAULT_THRESHOLDS", "Thresholds", "load_thresholds"), ".thresholds"),
})
