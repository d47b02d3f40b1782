"""The records every source produces, and the plain-data helpers that make them.

Whatever a source is (looptrace's spans, an OTLP request, a file another agent wrote), it ends as
a ``Records`` batch: rows of run, step, LLM-call, tool-call, span and diagnosis records, column by
column, tagged with a format version. ``spans`` maps spans of looptrace's conventions to records;
``text`` holds the JSON and text normalisation they share; ``actions`` says when two steps are the
same action. Nothing here does I/O.

Names are imported on first use (``looptrace.tracer.lazy``): ``looptrace sql`` prints through
``text.clean_text`` and must not pay for ``batch`` (dataclasses, inspect) to do it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .batch import FORMAT_VERSION, KINDS, Records

__all__ = ["FORMAT_VERSION", "KINDS", "Records"]

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, ".batch"))
