"""The viewer's screens: runs, run, step, replay (step through), SQL, help."""

from __future__ import annotations

from .help import HelpScreen
from .replay import ReplayScreen
from .run import RunScreen
from .runs import RunsScreen
from .sql import SqlScreen
from .step import StepScreen

__all__ = ["HelpScreen", "ReplayScreen", "RunScreen", "RunsScreen", "SqlScreen", "StepScreen"]
