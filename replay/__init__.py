"""Offline analysis and replay of recorded runs: the failure analyzer, replay, what-if, fork, diff."""

from __future__ import annotations

from .analyzer import Diagnosis, RunDiagnoses, analyze_store, diagnose

__all__ = ["Diagnosis", "RunDiagnoses", "analyze_store", "diagnose"]
