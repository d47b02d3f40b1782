"""A DataTable that takes a whole new list of rows without losing the user's place.

Live refresh hands the table the full current rows every couple of seconds. Clearing and
re-adding would jump the cursor to the top and flicker; instead, when the keys are unchanged or
only grew (a page of runs gained rows), changed cells are updated in place and new rows appended. Only when
the order changed (a new run sorted to the top) is the table rebuilt, and then the cursor goes back
to the row with the same key and the scroll position is kept.

``show_fitted`` lays the columns out for the table's width first (``viewer.columns``): whole columns
are dropped in the table's priority order, never a heading cut; it is done again on a resize.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

from ..columns import Column, fit_columns, measured

__all__ = ["SyncedTable", "Row"]

Row = tuple[str, Sequence[Text]]  # (key, cells): cells are always Text, never markup strings


def _same(a: object, b: Text) -> bool:
    return isinstance(a, Text) and a.plain == b.plain and a.style == b.style and a.spans == b.spans


class SyncedTable(DataTable[Text]):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._layout: tuple[Sequence[Column], Sequence[Row]] | None = None
        self.widths: dict[str, int] = {}  # the columns shown by ``show_fitted`` and their widths

    def room(self, rows: int) -> int:
        """The cells a line of ``rows`` rows has (less the vertical scrollbar when they will need one)."""
        region = self.content_region
        if not region.width:  # not laid out yet
            return self.app.size.width
        scrollbar = self.styles.scrollbar_size_vertical if rows + 1 > region.height else 0
        return max(1, region.width - scrollbar)

    def show_fitted(self, columns: Sequence[Column], rows: Sequence[Row]) -> None:
        """Show ``rows`` (one cell per column of ``columns``) in the columns that fit the table's
        width, each cell cut with an ellipsis to its column; done again when the table is resized."""
        self._layout = (columns, rows)
        fitted = measured(columns, ([cell.plain for cell in cells] for _, cells in rows))
        widths = fit_columns(fitted, self.room(len(rows)), gap=2 * self.cell_padding)
        shown = [i for i, c in enumerate(columns) if c.key in widths]
        labels = [(c.key, c.heading, c.right) for c in (columns[i] for i in shown)]
        current = [(str(c.key.value), c.label.plain, c.label.justify == "right") for c in self.ordered_columns]
        if labels != current:
            selected = self.current_key
            self.clear(columns=True)
            for key, heading, right in labels:
                self.add_column(Text(heading, justify="right" if right else "left"), key=key, width=widths[key])
            self._sync_fitted(rows, shown, widths)
            if selected is not None:
                self.move_to_key(selected)
        else:
            for column in self.ordered_columns:
                column.auto_width, column.width = False, widths[str(column.key.value)]
            self._require_update_dimensions = True  # the virtual width follows the new widths (on idle)
            self._sync_fitted(rows, shown, widths)
        self.widths = widths
        self._clear_caches()
        self.refresh()

    def _sync_fitted(self, rows: Sequence[Row], shown: list[int], widths: dict[str, int]) -> None:
        keys = list(widths)
        out: list[Row] = []
        for key, cells in rows:
            cut = []
            for i, column in zip(shown, keys):
                cell = cells[i]
                if cell.cell_len > widths[column]:
                    cell = cell.copy()
                    cell.truncate(widths[column], overflow="ellipsis")
                cut.append(cell)
            out.append((key, cut))
        self.sync(out)

    def on_resize(self, event: events.Resize) -> None:
        if self._layout is not None:
            self.show_fitted(*self._layout)

    @property
    def current_key(self) -> str | None:
        if not self.row_count or not self.is_valid_row_index(self.cursor_row):
            return None
        return self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value

    def keys(self) -> list[str]:
        return [str(row.key.value) for row in self.ordered_rows]

    def sync(self, rows: Sequence[Row]) -> None:
        keys = [k for k, _ in rows]
        current = self.keys()
        columns = [c.key for c in self.ordered_columns]
        if keys[: len(current)] == current:
            for key, cells in rows[: len(current)]:
                for column, old, new in zip(columns, self.get_row(key), cells):
                    if not _same(old, new):
                        self.update_cell(key, column, new, update_width=True)
            for key, cells in rows[len(current):]:
                self.add_row(*cells, key=key)
            return
        selected, scroll_y = self.current_key, self.scroll_y
        self.clear()
        for key, cells in rows:
            self.add_row(*cells, key=key)
        if selected in keys:
            self.move_cursor(row=keys.index(selected), animate=False, scroll=False)
        self.scroll_to(y=scroll_y, animate=False, immediate=True)

    async def _on_idle(self, event: events.Idle) -> None:
        # DataTable measures new rows' columns when idle, but a row painted before that (a process
        # short of CPU paints first) stays cached at the old widths, cut short, until something
        # else changes: seen as '[bold' for '[bold]agent[/]' in a test under load. So when idle
        # widened the columns, the cached lines are dropped and the table painted again.
        before = [c.get_render_width(self) for c in self.ordered_columns]
        await super()._on_idle(event)
        if [c.get_render_width(self) for c in self.ordered_columns] != before:
            self._clear_caches()
            self.refresh()

    def move_to_key(self, key: str) -> bool:
        """Put the cursor on the row ``key`` (scrolling it into view); False if there is none."""
        try:
            index = self.get_row_index(key)
        except RowDoesNotExist:
            return False
        self.move_cursor(row=index, animate=False)
        return True
