"""Files written by other agents (trajectories, chat logs, OTLP JSON), imported as runs.

One module per format, each a pure ``parse(data, path) -> list[Trajectory]`` over decoded data;
``formats`` detects a file's format; ``importing`` walks paths and hands what it parsed to the sink
(imported on its own: it loads the OTLP decoder). Names are imported on first use
(``looptrace.tracer.lazy``), so listing the ``import`` command loads no parser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...lazy import lazy_exports

if TYPE_CHECKING:
    from .formats import FORMATS, PARSERS, TrajectoryFormatError, detect, parse_file
    from .trajectory import ImportedStep, Trajectory

__all__ = ["FORMATS", "PARSERS", "TrajectoryFormatError", "detect", "parse_file", "ImportedStep", "Trajectory"]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("FORMATS", "PARSERS", "TrajectoryFormatError", "detect", "parse_file"), ".formats"),
    **dict.fromkeys(("ImportedStep", "Trajectory"), ".trajectory"),
})
