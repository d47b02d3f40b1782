"""One-file, offline HTML reports of runs: ``looptrace report``.

Not Textual: plain HTML rendered by pure functions from the store's public views. ``data`` reads,
``page``/``index``/``plot`` render, ``markup`` is the one way trace text reaches a page.
"""

from __future__ import annotations

from .data import IndexRow, RunReport, load_index, load_report, load_rollups
from .index import page_name, render_index
from .page import render_run
from .write import ReportError, write_all, write_run

__all__ = [
    "IndexRow", "ReportError", "RunReport", "load_index", "load_report", "load_rollups", "page_name", "render_index",
    "render_run", "write_all", "write_run",
]
