"""The runs table: one row per run, keyed by run id, with badges for status and diagnosis."""

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

__all__ = ["RunsTable", "RUN_COLUMNS", "run_cells"]

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
        label_badge(r.label, r.other_labels),
        _num(fmt_int(r.n_steps)),
        _num(fmt_compact(r.tokens)),
        _num(fmt_cost(r.cost_usd)),
        _num(fmt_seconds(r.seconds)),
        _num(str(r.children) if r.children else ""),
    ]


class RunsTable(SyncedTable):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "Open")]

    def on_mount(self) -> None:
        for sort, heading, numeric in RUN_COLUMNS:
            self.add_column(Text(heading, justify="right" if numeric else "left"), key=sort or heading)

    def show(self, rows: Sequence[RunRow]) -> None:
        self.sync([(r.run_id, run_cells(r)) for r in rows])

    def mark_sort(self, sort: str, descending: bool) -> None:
        """Show the sort column and direction in the column headings."""
        for key, heading, numeric in RUN_COLUMNS:
            column = self.columns.get(key or heading)  # type: ignore[call-overload]
            if column is None:
                continue
            arrow = (" ▼" if descending else " ▲") if key == sort else ""
            column.label = Text(heading + arrow, justify="right" if numeric else "left")
            column.content_width = max(column.content_width, column.label.cell_len)
        self.refresh()

