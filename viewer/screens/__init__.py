"""The viewer's screens: runs, run, step, replay (step through), diff (side by side), SQL, search,
usage (roll-ups), help."""

from __future__ import annotations

from .diff import DiffScreen
from .help import HelpScreen
from .replay import ReplayScreen
from .run import RunScreen
from .runs import RunsScreen
from .search import SearchScreen
from .sql import SqlScreen
from .step import StepScreen
from .usage import UsageScreen

__all__ = ["DiffScreen", "HelpScreen", "ReplayScreen", "RunScreen", "RunsScreen", "SearchScreen", "SqlScreen", "StepScreen",
           "UsageScreen"]
