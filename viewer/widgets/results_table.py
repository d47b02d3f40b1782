"""Results of a user query: column names and cells escaped like any trace text."""

from __future__ import annotations

from rich.text import Text

from looptrace.tracer.query.sql import QueryResult

from ..safe import safe, safe_cell
from .synced_table import SyncedTable

__all__ = ["ResultsTable"]


class ResultsTable(SyncedTable):
    def show(self, result: QueryResult) -> None:
        self.clear(columns=True)
        numeric = [
            bool(result.rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in result.rows)
            for i in range(len(result.columns))
        ]
        for i, name in enumerate(result.columns):
            label = safe(name, newlines=False, width=40)
            label.justify = "right" if numeric[i] else "left"
            self.add_column(label, key=f"c{i}")
        for n, row in enumerate(result.rows):
            cells = [safe_cell(v) for v in row]
            for cell, num in zip(cells, numeric):
                cell.justify = "right" if num else "left"
            self.add_row(*cells, key=str(n))

    def show_nothing(self) -> None:
        self.clear(columns=True)
        self.add_column(Text(""), key="empty")
