"""Files written by other agents (trajectories, chat logs, OTLP JSON), imported as runs.

One module per format, each a pure ``parse(data, path) -> list[Trajectory]`` over decoded data;
``formats`` detects a file's format; ``importing`` walks paths and hands what it parsed to the sink
(imported on its own: it loads the OTLP decoder).
"""

from __future__ import annotations

from .formats import FORMATS, PARSERS, TrajectoryFormatError, detect, parse_file
from .trajectory import ImportedStep, Trajectory

__all__ = ["FORMATS", "PARSERS", "TrajectoryFormatError", "detect", "parse_file", "ImportedStep", "Trajectory"]
