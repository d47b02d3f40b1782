"""Offline analysis and replay of recorded runs: the failure analyzer, replay, what-if, fork, diff.

Names are imported on first use (``looptrace.tracer.lazy``), so the CLI can list the replay
commands without importing the analyzer or the loop behind it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from looptrace.tracer.lazy import lazy_exports

if TYPE_CHECKING:
    from .analyzer import Diagnosis, RunDiagnoses, analyze_store, diagnose

__all__ = ["Diagnosis", "RunDiagnoses", "analyze_store", "diagnose"]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, ".analyzer"))
