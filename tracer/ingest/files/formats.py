"""Trajectory files written by other agents, parsed into ``Trajectory`` values.

One module per format, each a pure ``parse(data, path) -> list[Trajectory]`` over already-decoded
JSON; ``detect`` picks the module and ``shell`` holds the heuristics shared by shell-command agents.
Nothing here touches the store: ``replay.importing`` does that.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .trajectory import Trajectory
from . import generic_chat
from . import minisweagent
from . import openai_chat
from . import sweagent
from .detect import FORMATS, detect, is_candidate, read_document
from .errors import TrajectoryFormatError

__all__ = [
    "FORMATS", "PARSERS", "TrajectoryFormatError", "detect", "is_candidate", "parse_file", "read_document",
]

PARSERS: dict[str, Callable[[Any, Path], list[Trajectory]]] = {
    "swe-agent": sweagent.parse,
    "mini-swe-agent": minisweagent.parse,
    "openai-chat": openai_chat.parse,
    "chat": generic_chat.parse,
}


def parse_file(path: Path) -> tuple[str, list[Trajectory]]:
    """(format, runs) of one file; ``source`` is ``path`` as given, so pass it absolute.

    Raises ``TrajectoryFormatError`` with the reason when the file cannot be imported.
    """
    data = read_document(path)
    fmt = detect(path, data)
    return fmt, PARSERS[fmt](data, path)
