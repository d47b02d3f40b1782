"""A DataTable that takes a whole new list of rows without losing the user's place.

Live refresh hands the table the full current rows every couple of seconds. Clearing and
re-adding would jump the cursor to the top and flicker; instead, when the keys are unchanged or
only grew (a page of runs gained rows), changed cells are updated in place and new rows appended. Only when
the order changed (a new run sorted to the top) is the table rebuilt, and then the cursor goes back
to the row with the same key and the scroll position is kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

__all__ = ["SyncedTable", "Row"]

Row = tuple[str, Sequence[Text]]  # (key, cells): cells are always Text, never markup strings


def _same(a: object, b: Text) -> bool:
    return isinstance(a, Text) and a.plain == b.plain and a.style == b.style and a.spans == b.spans


class SyncedTable(DataTable[Text]):
    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)

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
