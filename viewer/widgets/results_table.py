"""Results of a user query: column names and cells escaped like any trace text.

Narrower than the result, the table shows the query's first columns whole and hides the rest
(``viewer.columns``: priority is the query's column order; a text column is cut with … to no less
than ``LEAST``); ``hidden`` names them, and the SQL screen says so.
"""

from __future__ import annotations

from rich.text import Text

from looptrace.tracer.query.sql import QueryResult

from ..columns import Column
from ..safe import safe, safe_cell
from .synced_table import SyncedTable

__all__ = ["ResultsTable", "LEAST"]

LEAST = 12  # a text column's narrowest, cut with an ellipsis


class ResultsTable(SyncedTable):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.columns_all: list[Column] = []

    def show(self, result: QueryResult) -> None:
        numeric = [
            bool(result.rows) and all(isinstance(r[i], (int, float)) or r[i] is None for r in result.rows)
            for i in range(len(result.columns))
        ]
        self.columns_all = [Column(f"c{i}", safe(name, newlines=False, width=40).plain, i,
                                   0 if numeric[i] else LEAST, numeric[i])
                            for i, name in enumerate(result.columns)]
        rows = []
        for n, row in enumerate(result.rows):
            cells = [safe_cell(v) for v in row]
            for cell, num in zip(cells, numeric):
                cell.justify = "right" if num else "left"
            rows.append((str(n), cells))
        self.show_fitted(self.columns_all, rows)

    @property
    def hidden(self) -> list[str]:
        """The headings of the result's columns the table has no room for."""
        return [c.heading for c in self.columns_all if c.key not in self.widths]

    def show_nothing(self) -> None:
        self._layout = None
        self.columns_all = []
        self.widths = {}
        self.clear(columns=True)
        self.add_column(Text(""), key="empty")
