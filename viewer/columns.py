"""Which columns a table shows in a given width: whole columns, dropped in a documented priority.

A table too wide for its terminal used to cut: headers (``duration`` became ``du``), agent names
(``demo-context-overflow`` and ``demo-context-defended`` both read ``demo-context…``), and a header
that wrapped. The rule now, for every table of the viewer: a column is shown with its whole heading
and at least its ``least`` width, or not at all. In priority order (0 first) each column takes the
width its widest cell needs, or all that is left if that is at least its ``least`` (its cells cut
with an ellipsis), or is hidden. So a column is never cut to make room for a less important one,
the columns hidden are the least important ones that do not fit, and a narrow column of lower
priority may still show beside a hidden wide one. A long text column (a run's task) can give way
earlier: with an ``ample`` width it takes at most that much in its turn, and the room left once every
column has had its turn goes to it, up to its widest cell; so a wide terminal shows more of the task
while a narrow one still shows the numbers beside it. The priorities of each table are listed in
docs/viewer.md and on its help screen (``priority_note``).

Pure functions over plain data: the tables measure their cells and ask ``fit_columns``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from rich.cells import cell_len

__all__ = ["Column", "fit_columns", "measured", "priority_note", "GAP"]

GAP = 2  # a cell's padding, one blank either side (DataTable's cell_padding, LazyTable's _PAD)


@dataclass(frozen=True)
class Column:
    """One column of a table. ``natural`` is its widest cell (set by ``measured``); ``least`` the
    narrowest its cells are still worth reading at (cut with an ellipsis below ``natural``), or 0:
    never narrower than its widest cell. A heading is never cut: it bounds both from below."""

    key: str
    heading: str
    priority: float  # 0 first: kept longest; the highest number is dropped first
    least: int = 0
    right: bool = False  # numbers: heading and cells right-aligned
    natural: int = 0
    ample: int = 0  # at most this wide in its turn, then the room left over (0: all it wants in its turn)

    @property
    def want(self) -> int:
        """The width at which nothing of the column is cut."""
        return max(cell_len(self.heading), self.natural)

    @property
    def floor(self) -> int:
        """The width below which the column is dropped rather than shown."""
        least = self.least or self.want
        return max(cell_len(self.heading), min(least, self.want))


def measured(columns: Sequence[Column], rows: Iterable[Sequence[str]]) -> list[Column]:
    """``columns`` with ``natural`` set to the widest plain text of each, over ``rows``."""
    widths = [0] * len(columns)
    for row in rows:
        for i, text in enumerate(row[: len(columns)]):
            n = cell_len(text)
            widths[i] = max(widths[i], n)
    return [replace(c, natural=w) for c, w in zip(columns, widths)]


def fit_columns(columns: Sequence[Column], width: int, *, gap: int = GAP) -> dict[str, int]:
    """``{key: width}`` of the columns to show in ``width`` cells, in the table's order; each column
    also takes ``gap`` cells of padding.

    In priority order each column takes the width of its widest cell, or all that is left if that
    is less but still at least its ``floor`` (its cells then cut with an ellipsis), or is hidden. So
    a column is never cut to make room for a less important one, and a narrow column can still
    show after a wide one was hidden. The most important column is shown even when it alone is
    wider than ``width`` (the table then scrolls sideways).
    """
    order = sorted(range(len(columns)), key=lambda i: (columns[i].priority, i))
    widths: dict[int, int] = {}
    left = width
    for n, i in enumerate(order):
        column = columns[i]
        want = min(column.want, max(column.ample, column.floor)) if column.ample else column.want
        w = min(want, left - gap)
        if w >= column.floor or n == 0:
            widths[i] = max(w, column.floor)
            left -= widths[i] + gap
    for i in order:  # the room left over, to the columns that took less than they want
        if i in widths and left > 0 and columns[i].want > widths[i]:
            more = min(columns[i].want - widths[i], left)
            widths[i] += more
            left -= more
    return {columns[i].key: widths[i] for i in sorted(widths)}


def priority_note(columns: Sequence[Column], names: dict[str, str] | None = None) -> str:
    """How ``columns`` give way, for a help screen (``names``: what to call a column without a heading)."""
    named = [(names or {}).get(c.key) or c.heading or c.key for c in sorted(columns, key=lambda c: c.priority)]
    return ("Columns kept longest first: " + ", ".join(named) + ". Too narrow for them all, the last are "
            "hidden whole, never a heading cut (a text column may be cut with … to fit).")
