"""The analyzer's thresholds live in the rules layer (``looptrace.tracer.rules.thresholds``), where
the loop and the guard read the same ones; this path stays for existing imports."""

from __future__ import annotations

from looptrace.tracer.rules.thresholds import DEFAULT_THRESHOLDS, Thresholds, load_thresholds

__all__ = ["Thresholds", "DEFAULT_THRESHOLDS", "load_thresholds"]
