"""The runs table: one row per run, keyed by run id, with badges for status and diagnosis.

Column priority: the columns that answer "did it fail, and how" (status, diagnosis) are never cut;
the free text (agent, task, model) gives up width first, in that order of keeping, so that at 80
columns every run's status and diagnosis show in full and at 120 the numbers do too. ``free_widths``
is the rule, a pure function of the table's width and the other columns' widths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..badges import label_badge, status_badge
from ..data import RunRow
from ..format import fmt_compact, fmt_cost, fmt_int, fmt_seconds, fmt_short_time
from ..safe import safe
from .synced_table import SyncedTable

__all__ = ["RunsTable", "RUN_COLUMNS", "run_cells", "free_widths", "FREE", "CORE"]

# (sort name from data.SORTS or None, heading, numeric)
RUN_COLUMNS: tuple[tuple[str | None, str, bool], ...] = (
    ("started", "started", False),
    ("agent", "agent", False),
    ("task", "task", False),
    ("model", "model", False),
    ("status", "status", False),
    ("diagnosis", "diagnosis", False),
    ("steps", "steps", True),
    ("tokens", "tokens", True),
    ("cost", "cost", True),
    ("duration", "duration", True),
    (None, "sub", True),
)


FREE = ("agent", "task", "model")  # free text, kept in this order; it gives up width first
CORE = ("started", "status", "diagnosis")  # always shown in full, with the free text's minimum beside them
FREE_MIN = 20  # columns of free text kept even when the numbers then run off the right edge
_PAD = 2  # a DataTable cell's padding, both sides
_SHORTEST = 6  # a free column given less than this shows nothing rather than two letters


def free_widths(total: int, natural: dict[str, int]) -> dict[str, int]:
    """Widths of the free-text columns in a table ``total`` columns wide, given every column's
    ``natural`` width (its widest cell or heading). The numbers keep their room when the free text
    can still have ``FREE_MIN`` columns; below that the free text keeps ``FREE_MIN`` and the numbers
    (the right end of the table) run off the edge, still reachable by scrolling."""
    fixed = {k: w + _PAD for k, w in natural.items() if k not in FREE}
    core = sum(w for k, w in fixed.items() if k in CORE)
    budget = max(total - sum(fixed.values()), min(FREE_MIN, total - core)) - _PAD * len(FREE)
    out = {}
    for key in FREE:
        width = min(natural.get(key, 0), max(0, budget))
        out[key] = width if width >= _SHORTEST else 0
        budget -= out[key]
    return out


def _num(text: str) -> Text:
    return Text(text, justify="right")


def run_cells(r: RunRow) -> list[Text]:
    agent = safe(r.agent, newlines=False, width=22)
    if r.is_child:
        kind = "replay" if r.replay_of else "fork" if r.forked_from else "sub"
        agent = Text.assemble((f"↳{kind} ", "dim"), agent)
    return [
        Text(fmt_short_time(r.started_at)),
        agent,
        safe(r.task, newlines=False, width=28),
        safe(r.model, newlines=False, width=16),
        status_badge(r.status),
        safe(r.live, newlines=False, width=30, style="bold yellow") if r.live else label_badge(r.label, r.other_labels),
        _num(fmt_int(r.n_steps)),
        _num(fmt_compact(r.tokens)),
        _num(fmt_cost(r.cost_usd)),
        _num(fmt_seconds(r.seconds)),
        _num(str(r.children) if r.children else ""),
    ]


class RunsTable(SyncedTable):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open")]
    _rows: Sequence[RunRow] = ()
    _sort: str | None = None

    def on_mount(self) -> None:
        for sort, heading, numeric in RUN_COLUMNS:
            self.add_column(Text(heading, justify="right" if numeric else "left"), key=sort or heading)

    def show(self, rows: Sequence[RunRow]) -> None:
        self._rows = rows
        cells = [(r.run_id, run_cells(r)) for r in rows]
        natural = {key or heading: max([len(heading) + (2 if key == self._sort else 0)]
                                       + [c[i].cell_len for _, c in cells])
                   for i, (key, heading, _) in enumerate(RUN_COLUMNS)}
        width = self.scrollable_content_region.width or self.app.size.width
        widths = free_widths(width, natural)
        index = {key or heading: i for i, (key, heading, _) in enumerate(RUN_COLUMNS)}
        for key, w in widths.items():
            column = self.columns.get(key)  # type: ignore[call-overload]
            if column is not None:
                column.auto_width, column.width = False, w
            for _, c in cells:  # cut with an ellipsis here: DataTable would crop without one
                c[index[key]].truncate(w, overflow="ellipsis")
        self._clear_caches()
        self.sync(cells)
        self.refresh()

    def on_resize(self) -> None:
        if self._rows:
            self.show(self._rows)

    def mark_sort(self, sort: str, descending: bool) -> None:
        """Show the sort column and direction in the column headings."""
        self._sort = sort
        for key, heading, numeric in RUN_COLUMNS:
            column = self.columns.get(key or heading)  # type: ignore[call-overload]
            if column is None:
                continue
            arrow = (" ▼" if descending else " ▲") if key == sort else ""
            column.label = Text(heading + arrow, justify="right" if numeric else "left")
            column.content_width = max(column.content_width, column.label.cell_len)
        if self._rows:
            self.show(self._rows)
        self.refresh()
