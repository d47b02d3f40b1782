"""The runs table: one row per run, keyed by run id, with badges for status and diagnosis.

Column priority (``RUN_COLUMNS``, laid out by ``viewer.columns``): the columns that answer "did it
fail, and how" (status, diagnosis) go last, then when it started and which agent it was (the agent's
name whole: two agents that share a prefix must not look alike), then the task (what the run was
asked: the most telling column after those), then the numbers, and the model gives way first; the
column the runs are sorted by comes right after status and diagnosis. On the demo store a run shows
started, agent, status and diagnosis at 80 columns; the task and steps too at 120; everything at 160.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from ..badges import label_badge, status_badge
from ..columns import Column
from ..data import RunRow
from ..format import fmt_compact, fmt_cost, fmt_int, fmt_seconds, fmt_short_time
from ..safe import safe
from .synced_table import SyncedTable

__all__ = ["RunsTable", "RUN_COLUMNS", "run_cells"]

# In the table's order; key: the sort name from data.SORTS, or the heading. priority 0 is kept longest.
RUN_COLUMNS: tuple[Column, ...] = (
    Column("started", "started", priority=2),
    Column("agent", "agent", priority=3, least=16),
    Column("task", "task", priority=4, least=16, ample=28),
    Column("model", "model", priority=10, least=8),
    Column("status", "status", priority=0),
    Column("diagnosis", "diagnosis", priority=1),
    Column("steps", "steps", priority=5, right=True),
    Column("tokens", "tokens", priority=6, right=True),
    Column("cost", "cost", priority=7, right=True),
    Column("duration", "duration", priority=8, right=True),
    Column("sub", "sub", priority=9, right=True),
)
# The task is 28 cells wide in its turn (the numbers after it still fit at 160 columns) and takes the
# room left over on a wider terminal, up to this many characters (a SWE-bench task is an issue's text).
TASK_CHARS = 200
SORTED_PRIORITY = 1.5  # the sort column's: after status and diagnosis, before the rest


def _num(text: str) -> Text:
    return Text(text, justify="right")


def run_cells(r: RunRow) -> list[Text]:
    agent = safe(r.agent, newlines=False, width=40)
    if r.is_child:
        kind = "replay" if r.replay_of else "fork" if r.forked_from else "sub"
        agent = Text.assemble((f"↳{kind} ", "dim"), agent)
    return [
        Text(fmt_short_time(r.started_at)),
        agent,
        safe(r.task, newlines=False, width=TASK_CHARS),
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
    _arrow = ""

    def columns_now(self) -> list[Column]:
        """``RUN_COLUMNS`` with the sort's arrow in its heading (counted in its width); the column the
        runs are sorted by is kept next after status and diagnosis (SORTED_PRIORITY)."""
        return [replace(c, heading=c.heading + self._arrow, priority=min(c.priority, SORTED_PRIORITY))
                if c.key == self._sort else c for c in RUN_COLUMNS]

    def show(self, rows: Sequence[RunRow]) -> None:
        self._rows = rows
        self.show_fitted(self.columns_now(), [(r.run_id, run_cells(r)) for r in rows])

    def mark_sort(self, sort: str, descending: bool) -> None:
        """Show the sort column and direction in the column headings."""
        self._sort, self._arrow = sort, (" ▼" if descending else " ▲")
        self.show(self._rows)
