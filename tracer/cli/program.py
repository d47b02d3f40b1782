"""How to name ``looptrace`` in a hint so that the hint runs when pasted.

A hint that says ``looptrace view demo.duckdb`` fails with "command not found" when looptrace was run
as ``.venv/bin/looptrace`` from an inactive virtualenv (as ``make demo`` runs it). So hints name the
program the way it was started: ``looptrace`` when that is what the shell finds on PATH, else the path
it was started by, relative to the current folder when it is below it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

__all__ = ["program"]


def _same(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def program(argv0: str | None = None) -> str:
    """The command that starts this looptrace again, as a user would type it here."""
    started = Path(argv0 if argv0 is not None else sys.argv[0])
    on_path = shutil.which("looptrace")
    if started.name != "looptrace":  # `python -m looptrace.tracer.cli`, or a library call
        return "looptrace" if on_path else f"{sys.executable} -m looptrace.tracer.cli"
    if on_path and _same(on_path, started):
        return "looptrace"
    if started.is_absolute():
        try:
            started = Path(os.path.abspath(started)).relative_to(Path(os.path.abspath(Path.cwd())))
        except ValueError:
            return str(started)
    text = str(started)
    return text if os.sep in text else f".{os.sep}{text}"  # a bare name would be looked up on PATH
