"""One-file, offline HTML reports of runs: ``looptrace report``.

Not Textual: plain HTML rendered by pure functions from the store's public views. ``data`` reads,
``page``/``index``/``plot`` render, ``markup`` is the one way trace text reaches a page. Names are
imported on first use (``looptrace.tracer.lazy``), so listing the commands does not load DuckDB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from looptrace.tracer.lazy import lazy_exports

if TYPE_CHECKING:
    from .data import IndexRow, RunReport, load_index, load_report, load_rollups
    from .index import page_name, render_index
    from .page import render_run
    from .write import ReportError, write_all, write_run

__all__ = [
    "IndexRow", "ReportError", "RunReport", "load_index", "load_report", "load_rollups", "page_name", "render_index",
    "render_run", "write_all", "write_run",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("IndexRow", "RunReport", "load_index", "load_report", "load_rollups"), ".data"),
    "page_name": ".index", "render_index": ".index", "render_run": ".page",
    **dict.fromkeys(("ReportError", "write_all", "write_run"), ".write"),
})
