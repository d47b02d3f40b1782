"""Importers from other packages, found through the ``looptrace.importers`` entry-point group.

A package adds a format by declaring, in its ``pyproject.toml``::

    [project.entry-points."looptrace.importers"]
    myagent = "myagent_looptrace:IMPORTER"

where ``IMPORTER`` is an ``Importer``: a name, a one-line description, ``detect(path, data)`` over
the file's parsed JSON, and the pure ``parse(data, path) -> list[Trajectory]`` every built-in format
has. Built-in formats are tried first, so a plug-in cannot capture their files. A plug-in that fails
to load is reported by ``looptrace import --formats`` and otherwise ignored: one broken package must
not stop every import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from .trajectory import Trajectory

__all__ = ["GROUP", "Importer", "plugins"]

GROUP = "looptrace.importers"


@dataclass(frozen=True)
class Importer:
    name: str
    description: str
    detect: Callable[[Path, Any], bool]
    parse: Callable[[Any, Path], list[Trajectory]]


def plugins() -> tuple[list[Importer], list[tuple[str, str]]]:
    """(the importers installed packages declare, (entry point, why it could not be loaded))."""
    found: list[Importer] = []
    broken: list[tuple[str, str]] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            importer = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plug-in is reported, not fatal
            broken.append((ep.name, f"{type(exc).__name__}: {exc}"))
            continue
        if not all(callable(getattr(importer, a, None)) for a in ("detect", "parse")) or not isinstance(
                getattr(importer, "name", None), str):
            broken.append((ep.name, f"{ep.value} is not an Importer (name, description, detect, parse)"))
            continue
        found.append(importer)
    return found, broken
