"""The viewer's widgets, one per module."""

from __future__ import annotations

from .charts import RunCharts
from .diagnosis_panel import DiagnosisPanel
from .diff_table import DiffTable
from .keys_footer import KeysFooter
from .lazy_table import LazyTable
from .results_table import ResultsTable
from .run_summary import RunSummary
from .runs_table import RunsTable
from .step_view import StepView
from .synced_table import SyncedTable
from .timeline import Timeline
from .title_bar import TitleBar

__all__ = [
    "RunCharts", "DiagnosisPanel", "DiffTable", "KeysFooter", "LazyTable", "ResultsTable", "RunSummary", "RunsTable",
    "StepView", "SyncedTable", "Timeline", "TitleBar",
]
