"""A read-only table with a row cursor that renders only the lines on screen.

A ``DataTable`` measures and lays out every cell of every row before it paints, and keeps a
renderable per cell: for a 1,000-step run that was most of the time it took to open. This table
keeps just the row keys, the column widths (``fit`` over the cells' plain text, cheaper than
measuring ``Text``) and a function that makes a row's cells, called only for the rows
``render_line`` draws. It looks and moves like the DataTable it replaced (fixed header, zebra
stripes, a row cursor whose colour wins over the cells' while a cell's own background shows
through), so the screens' snapshots did not change.

Cells are ``rich.text.Text`` with trace text escaped by ``viewer.safe``; they are joined as Text,
never parsed as markup.

The columns shown are laid out for the table's width by ``viewer.columns`` (again on a resize): whole
columns hidden in the table's priority order, a cell wider than its column cut with an ellipsis,
never a heading. Asked for its width (``width: auto``), the table gives what every column wants.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..columns import Column, fit_columns

__all__ = ["LazyTable", "CellsFn", "fit"]

CellsFn = Callable[[int], Sequence[Text]]  # row index -> that row's cells, one Text per column
_PAD = 1  # blank cells either side of each column, as DataTable's cell_padding


def fit(rows: Iterable[Sequence[str]], columns: int) -> list[int]:
    """The width of the widest text in each of the first ``columns`` columns of ``rows``."""
    widths = [0] * columns
    for row in rows:
        for column, text in enumerate(row[:columns]):
            width = cell_len(text)
            if width > widths[column]:
                widths[column] = width
    return widths


class LazyTable(ScrollView, can_focus=True):
    # The look of Textual's DataTable (its default CSS, for the parts this table has).
    DEFAULT_CSS = """
    LazyTable {
        background: $surface;
        color: $foreground;
        height: auto;
        max-height: 100%;
        &:focus {
            background-tint: $foreground 5%;
            & > .lazy-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .lazy-table--header {
                background-tint: $foreground 5%;
            }
        }
        &:dark > .lazy-table--even-row {
            background: $surface-darken-1 40%;
        }
        & > .lazy-table--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .lazy-table--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .lazy-table--even-row {
            background: $surface-lighten-1 50%;
        }
        & > .lazy-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "lazy-table--header", "lazy-table--even-row", "lazy-table--odd-row", "lazy-table--cursor",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home,ctrl+home", "first", "First row", show=False),
        Binding("end,ctrl+end", "last", "Last row", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, repaint=False)  # an index into the rows

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._columns: list[Column] = []
        self._shown: list[int] = []  # indexes of the columns shown, in order
        self._labels: list[Text] = []
        self._keys: list[str] = []
        self._index: dict[str, int] = {}
        self._cells: CellsFn = lambda index: ()
        self._fitted: list[int] = []  # the widest cell of each column
        self._widths: list[int] = []  # the width of each column shown
        # From a change of rows until the next refresh has sized the table, the cursor cannot be
        # scrolled into view yet (the page height is stale): it is scrolled after that refresh.
        self._laid_out = False
        self._scroll_pending = False

    # -- contents ----------------------------------------------------------------------------

    def set_columns(self, columns: Sequence[Column]) -> None:
        self._columns = list(columns)
        self._fit()

    def set_rows(self, keys: Sequence[str], cells: CellsFn, widths: Sequence[int]) -> None:
        """Show ``keys`` (unique), the cells of row ``i`` being ``cells(i)``, in columns ``widths`` wide.

        ``widths`` must fit every cell (``fit`` over the cells' plain text): a wider cell would push
        the columns after it out of line.

        The cursor stays on the row with the same key and the scroll position is kept, so a live
        refresh that only adds rows does not move what the user looks at (even if they scrolled
        away from the cursor). If the cursor's row moved, it is scrolled into view.
        """
        current = self.current_key
        self._keys = list(keys)
        self._index = {key: i for i, key in enumerate(self._keys)}
        self._cells = cells
        self._fitted = list(widths)
        self._fit()
        found = self._index.get(current) if current is not None else None
        row = self.validate_cursor_row(self.cursor_row if found is None else found)
        if row != self.cursor_row:
            self.set_reactive(LazyTable.cursor_row, row)
            self._scroll_pending = True
        self._laid_out = False
        self.call_after_refresh(self._after_layout)
        self.refresh()

    def _measured(self) -> list[Column]:
        fitted = self._fitted + [0] * (len(self._columns) - len(self._fitted))
        return [Column(c.key, c.heading, c.priority, c.least, c.right, w) for c, w in zip(self._columns, fitted)]

    def _room(self) -> int:
        region = self.content_region
        if not region.width:  # not laid out yet
            return self.app.size.width
        scrollbar = self.styles.scrollbar_size_vertical if len(self._keys) + 1 > region.height else 0
        return max(1, region.width - scrollbar)

    def _fit(self) -> None:
        columns = self._measured()
        widths = fit_columns(columns, self._room(), gap=2 * _PAD)
        self._shown = [i for i, c in enumerate(columns) if c.key in widths]
        self._widths = [widths[columns[i].key] for i in self._shown]
        self._labels = [Text(columns[i].heading, justify="right" if columns[i].right else "left")
                        for i in self._shown]
        self.virtual_size = Size(sum(w + 2 * _PAD for w in self._widths), len(self._keys) + 1)

    @property
    def shown_columns(self) -> list[str]:
        """The keys of the columns shown, in order."""
        return [self._columns[i].key for i in self._shown]

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return sum(c.want + 2 * _PAD for c in self._measured())

    def on_resize(self, event: events.Resize) -> None:
        self._fit()
        self.refresh()

    def _after_layout(self) -> None:
        self._laid_out = True
        if self._scroll_pending:
            self._scroll_pending = False
            self._scroll_to_cursor()

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def keys(self) -> list[str]:
        return list(self._keys)

    @property
    def current_key(self) -> str | None:
        return self._keys[self.cursor_row] if 0 <= self.cursor_row < len(self._keys) else None

    def move_to_key(self, key: str) -> bool:
        """Put the cursor on the row ``key`` (scrolling it into view); False if there is none."""
        index = self._index.get(key)
        if index is None:
            return False
        self.cursor_row = index
        return True

    # -- cursor ------------------------------------------------------------------------------

    def validate_cursor_row(self, row: int) -> int:
        return max(0, min(row, len(self._keys) - 1))

    def watch_cursor_row(self, old: int, new: int) -> None:
        self.refresh_lines(old + 1)
        self.refresh_lines(new + 1)
        if self._laid_out:
            self._scroll_to_cursor()
        else:
            self._scroll_pending = True
        key = self.current_key
        if key is not None:
            self.row_highlighted(key)

    def row_highlighted(self, key: str) -> None:
        """Called when the cursor lands on row ``key``; subclasses post their message."""

    def row_selected(self, key: str) -> None:
        """Called on enter (or a click on the cursor row); subclasses post their message."""

    @property
    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)  # the header does not scroll

    def _scroll_to_cursor(self) -> None:
        page, row, top = self._page, self.cursor_row, round(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False, force=True)
        elif row >= top + page:
            self.scroll_to(y=row - page + 1, animate=False, force=True)

    def action_cursor_up(self) -> None:
        self.cursor_row -= 1

    def action_cursor_down(self) -> None:
        self.cursor_row += 1

    def action_page_up(self) -> None:
        self.scroll_to(y=self.scroll_y - self._page, animate=False, force=True)
        self.cursor_row -= self._page

    def action_page_down(self) -> None:
        self.scroll_to(y=self.scroll_y + self._page, animate=False, force=True)
        self.cursor_row += self._page

    def action_first(self) -> None:
        self.cursor_row = 0

    def action_last(self) -> None:
        self.cursor_row = len(self._keys) - 1

    def action_select_cursor(self) -> None:
        key = self.current_key
        if key is not None:
            self.row_selected(key)

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        row = round(self.scroll_y) + offset.y - 1
        if 0 <= row < len(self._keys):
            event.stop()
            if row == self.cursor_row:
                self.action_select_cursor()
            else:
                self.cursor_row = row

    # -- rendering ---------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            style = self.get_component_rich_style("lazy-table--header")
            return self._strip(self._labels, style, Style.null(), scroll_x, width)
        row = scroll_y + y - 1
        if row >= len(self._keys):
            return Strip.blank(width, self.rich_style)
        zebra = self.get_component_rich_style("lazy-table--odd-row" if row % 2 else "lazy-table--even-row")
        if row == self.cursor_row:
            cursor = self.get_component_rich_style("lazy-table--cursor")
            # As DataTable's defaults: the cursor's text colour wins, a cell's own background shows.
            pre, post = zebra + cursor, Style.from_color(color=cursor.color)
        else:
            pre, post = zebra, Style.null()
        cells = self._cells(row)
        return self._strip([cells[i] for i in self._shown if i < len(cells)], pre, post, scroll_x, width)

    def _strip(self, cells: Sequence[Text], pre: Style, post: Style, x: int, width: int) -> Strip:
        """One line: ``pre`` under the cells and to the right of them, ``post`` over the cells."""
        line = Text(end="", no_wrap=True)
        for cell, column_width in zip(cells, self._widths):
            if cell.cell_len > column_width:
                cell = cell.copy()
                cell.truncate(column_width, overflow="ellipsis")
            room = column_width - cell.cell_len
            left = room if cell.justify == "right" else room // 2 if cell.justify == "center" else 0
            # As Rich justifies a cell: padded in its own style inside the column (a highlight fills
            # the column), unless it is empty; the padding between columns is the row's.
            style = cell.style if cell.plain else ""
            line.append(" " * _PAD)
            line.append(" " * left, style)
            line.append_text(cell)
            line.append(" " * (room - left), style)
            line.append(" " * _PAD)
        segments = Segment.apply_style(line.render(self.app.console), pre, post)
        return Strip(segments, line.cell_len).crop_extend(x, x + width, pre)
