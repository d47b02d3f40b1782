"""After a command has stored runs, let the packages above react: the analyzer diagnoses them.

The tracer is the lowest layer and never imports the analyzer (``replay``); a package that wants to
see new runs registers a function in the ``looptrace.on_stored`` entry-point group instead, the way
commands are found. ``demo``, ``import`` and ``collect`` call ``notify_stored`` once their runs are
in the store, so ``looptrace view`` shows diagnoses without a separate ``looptrace analyze``.

A hook is ``hook(db, run_ids) -> str | None``: ``run_ids`` are the runs just written, or None when
the caller does not know them (the hook then finds the runs it has not seen); the string, if any,
is one line for the user. A failing hook is reported in one line and never fails the command: the
runs are stored, and ``looptrace analyze`` can always be run later.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TextIO

__all__ = ["ON_STORED_GROUP", "notify_stored"]

ON_STORED_GROUP = "looptrace.on_stored"


def notify_stored(db: str, run_ids: Sequence[str] | None = None, *, out: TextIO | None = None) -> list[str]:
    """Run every registered hook over ``db``; print and return the lines they report."""
    out = out if out is not None else sys.stderr
    lines: list[str] = []
    for entry in sorted(entry_points(group=ON_STORED_GROUP), key=lambda e: e.name):
        try:
            line = entry.load()(db, None if run_ids is None else list(run_ids))
        except Exception as exc:  # noqa: BLE001 - the runs are stored; a hook must not fail the command
            line = f"warning: {entry.name} after storing runs failed ({type(exc).__name__}: {exc}); " \
                   f"run `looptrace {entry.name} --db {db}` to retry"
        if line:
            lines.append(line)
            print(line, file=out, flush=True)
    return lines
