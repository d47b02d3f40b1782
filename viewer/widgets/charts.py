"""Context size and cost across a run's steps, as two sparklines with their peaks spelled out."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Sparkline, Static

from ..data import TimelineStep
from ..format import fmt_cost, fmt_int

__all__ = ["RunCharts", "chart_captions"]


def chart_captions(steps: Sequence[TimelineStep]) -> tuple[str, str]:
    context = [(s.context_tokens or 0, s.step) for s in steps]
    if context and max(context)[0] > 0:
        peak, at = max(context)
        ctx = f"context tokens per step: peak {fmt_int(peak)} at step {at}, last {fmt_int(context[-1][0])}"
    else:
        ctx = "context tokens per step: none recorded"
    costs = [(s.cost_usd, s.step) for s in steps]
    if costs and max(costs)[0] > 0:
        peak_cost, at = max(costs)
        total = fmt_cost(sum(c for c, _ in costs))
        cost = f"cost per step: total {total}, peak {fmt_cost(peak_cost)} at step {at}"
    else:
        cost = "cost per step: none recorded"
    return ctx, cost


class RunCharts(Vertical):
    def compose(self) -> ComposeResult:
        yield Static(id="context-caption", classes="caption")
        yield Sparkline([], id="context-chart")
        yield Static(id="cost-caption", classes="caption")
        yield Sparkline([], id="cost-chart")

    def show(self, steps: Sequence[TimelineStep]) -> None:
        ctx, cost = chart_captions(steps)
        self.query_one("#context-caption", Static).update(Text(ctx))
        self.query_one("#cost-caption", Static).update(Text(cost))
        self.query_one("#context-chart", Sparkline).data = [float(s.context_tokens or 0) for s in steps]
        self.query_one("#cost-chart", Sparkline).data = [s.cost_usd for s in steps]
