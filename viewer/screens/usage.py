"""Where the tokens and the money went: tokens and cost by agent, by model and by day.

Read from the roll-up views (docs/schema.md). An unknown cost (a model without a price) is shown
as "unknown", never as 0: NULL and zero mean different things.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from looptrace.tracer.query.sql import QueryResult

from ..columns import Column
from ..messages import LoadFailed, UsageLoaded
from ..safe import safe, safe_cell
from ..usage import USAGE_LIMIT, load_usage
from ..widgets import KeysFooter, SyncedTable, TitleBar
from .base import ViewerScreen

__all__ = ["UsageScreen", "usage_cell", "USAGE_PRIORITY"]

# Narrow, the split of the tokens and the unpriced count give way first (viewer.columns); the
# first column (agent, model or day) is kept, then the cost.
USAGE_PRIORITY = {"cost_usd": 1, "tokens": 2, "runs": 3, "input_tokens": 4, "output_tokens": 5, "unpriced_runs": 6}


def usage_cell(column: str, value: Any) -> Text:
    """One roll-up value: money as dollars, an unknown cost as "unknown", counts with separators."""
    if value is None:
        return Text("unknown" if column == "cost_usd" else "—", style="dim", justify="right")
    if column == "cost_usd":
        return Text(f"${value:,.4f}", justify="right")
    if isinstance(value, int):
        return Text(f"{value:,}", justify="right")
    return safe_cell(value, width=40)


class UsageScreen(ViewerScreen):
    NAME = "usage"
    HELP = (
        "Tokens and cost by agent, by model and by day (UTC start date), most expensive first, from the\n"
        "views usage_by_agent, usage_by_model and usage_by_day. \"unknown\": the model has no price, so\n"
        "the cost is not known (it is not zero); unpriced_runs counts such runs.\n\n"
        "Columns kept longest first: agent, model or day, cost_usd, tokens, runs, input_tokens,\n"
        "output_tokens, unpriced_runs. Too narrow for them all, the last are hidden whole."
    )
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "usage")
        with VerticalScroll(id="usage-body"):
            for by in ("agent", "model", "day"):
                yield Static(Text(f"By {by}", style="bold"), classes="usage-title")
                yield SyncedTable(id=f"usage-{by}", classes="usage-table")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.load("usage", "usage", partial(load_usage, self.store), UsageLoaded)

    def on_usage_loaded(self, message: UsageLoaded) -> None:
        for by, result in message.groups:
            self._fill(self.query_one(f"#usage-{by}", SyncedTable), result)

    def _fill(self, table: SyncedTable, result: QueryResult) -> None:
        columns = [Column(name, safe(name, newlines=False).plain, 0 if i == 0 else USAGE_PRIORITY.get(name, 10 + i),
                          16 if i == 0 else 0, right=i > 0) for i, name in enumerate(result.columns)]
        rows: list[tuple[str, list[Text]]] = [
            (str(i), [usage_cell(c, v) for c, v in zip(result.columns, row)]) for i, row in enumerate(result.rows)]
        if result.truncated:
            rows.append(("more", [Text(f"… more than {USAGE_LIMIT} rows", style="dim"),
                                  *(Text("") for _ in result.columns[1:])]))
        table.show_fitted(columns, rows)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.query_one("#usage-agent", SyncedTable).show_fitted([], [])
        self.notify(safe(message.error, newlines=False).plain, severity="error")
