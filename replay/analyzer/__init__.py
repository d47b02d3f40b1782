"""The failure analyzer: stagnation, context bombs, cap hits and hallucinated tool calls, with evidence."""

from __future__ import annotations

from .analyze import RunDiagnoses, analyze_store, load_runs
from .rules import LABELS, Diagnosis, RunView, StepView, diagnose
from .thresholds import DEFAULT_THRESHOLDS, Thresholds, load_thresholds

__all__ = [
    "analyze_store", "load_runs", "RunDiagnoses", "diagnose", "Diagnosis", "RunView", "StepView", "LABELS",
    "Thresholds", "DEFAULT_THRESHOLDS", "load_thresholds",
]
