"""Offline analysis and replay of recorded runs: importers, the failure analyzer, replay."""

from __future__ import annotations

from .trajectory import ImportedStep, Trajectory, write_trajectories

__all__ = ["ImportedStep", "Trajectory", "write_trajectories"]
