"""Writing reports to files: one run's page, or an index and a page per run in a folder."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from looptrace.tracer.cli.program import program
from looptrace.tracer.export.outputs import output_folder
from looptrace.tracer.store import Store

from .data import load_index, load_report, load_rollups, resolve_run
from .index import page_name, render_index
from .page import render_run

__all__ = ["ReportError", "write_run", "write_all"]


class ReportError(Exception):
    """A report that cannot be written; the message says why."""


def _write(path: Path, html: str) -> int:
    # Written beside the target then renamed: a half-written page never replaces a good one.
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    os.replace(tmp, path)
    return len(html.encode())


def write_run(store: Store, run_id: str, out: Path) -> int:
    """Write the page of ``run_id`` (or of the one run it is a prefix of) to ``out``; returns its size in bytes."""
    found = resolve_run(store, run_id)
    if len(found) > 1:
        raise ReportError(f"{run_id!r} is the start of several run ids ({', '.join(found)}, ...): give more of it")
    report = load_report(store, found[0]) if found else None
    if report is None:
        raise ReportError(f"no run {run_id!r} in the store (list them with: {program()} sql --db "
                          f"{shlex.quote(str(store.path))} \"SELECT run_id FROM runs\")")
    return _write(out, render_run(report))


def write_all(store: Store, folder: Path, *, label: str) -> tuple[int, int]:
    """``index.html`` and one page per run in ``folder``; returns (pages written, bytes written)."""
    rows, more = load_index(store)
    rollups = load_rollups(store)
    with output_folder(folder):  # a folder made here goes again if a page fails
        total = _write(folder / "index.html", render_index(rows, more, rollups, store=label))
        for row in rows:
            report = load_report(store, row.run_id)
            if report is not None:
                total += _write(folder / page_name(row.run_id), render_run(report))
    return len(rows), total
