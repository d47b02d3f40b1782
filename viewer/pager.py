"""Opening a whole text in ``$PAGER``: the command is a pure function, so tests check it directly.

The text written for the pager is escaped with ``tracer.textsafe.visible`` first: a pager shows
control characters raw (``less -R``) or half-raw, and trace text must never drive the terminal.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path

from looptrace.tracer.cli.terminal import visible

__all__ = ["pager_command", "write_pager_file", "DEFAULT_PAGER"]

DEFAULT_PAGER = "less"


def pager_command(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The argv that shows ``path``: ``$PAGER`` (split like a shell would) or ``less``."""
    env = os.environ if environ is None else environ
    text = (env.get("PAGER") or "").strip() or DEFAULT_PAGER
    try:
        argv = shlex.split(text)
    except ValueError:
        argv = [text]
    return [*(argv or [DEFAULT_PAGER]), os.fspath(path)]


def write_pager_file(text: str) -> Path:
    """``text``, escaped for display, in a new temporary file the caller deletes."""
    fd, name = tempfile.mkstemp(prefix="looptrace-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(visible(text))
    return Path(name)
