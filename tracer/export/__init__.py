"""Getting data out of a store: Parquet export, reading an export like a store, OTLP out.

``looptrace export`` writes a store as partitioned Parquet (``parquet.py``, layout in ``layout.py``);
``ParquetSource`` (``source.py``) reads such a folder with the same views as a store, so
``looptrace sql`` and ``looptrace analyze`` work on either. (Spans go out over OTLP from the span
side, ``spans/otlp.py``; diagnoses from ``replay/evaluation.py``.) Names are imported on first
use (``looptrace.tracer.lazy``): ``looptrace sql`` reads through ``source`` and needs no writer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .layout import MANIFEST, ExportError, Manifest, read_manifest
    from .parquet import ExportReport, export_parquet
    from .source import ParquetSource, open_source

__all__ = [
    "export_parquet", "ExportReport", "ParquetSource", "open_source", "ExportError", "Manifest",
    "read_manifest", "MANIFEST",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(("MANIFEST", "ExportError", "Manifest", "read_manifest"), ".layout"),
    **dict.fromkeys(("ExportReport", "export_parquet"), ".parquet"),
    **dict.fromkeys(("ParquetSource", "open_source"), ".source"),
})
