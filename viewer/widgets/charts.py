"""Context size and cost across a run's steps, as two sparklines with their peaks spelled out.

Why not Textual's ``Sparkline``: it scales bars from the lowest value to the highest, so 47 tokens
beside 94 draws the 47 as an empty bar and two nearly equal steps look like a cliff; and it stretches
a short run's few values over the whole width, which reads as stray blocks. ``spark`` scales from 0,
as the HTML report's chart does, with up to three columns per step (steps share a column, by their
maximum, only when there are more steps than columns).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from ..data import TimelineStep
from ..format import fmt_cost, fmt_int

__all__ = ["RunCharts", "Spark", "chart_captions", "spark"]

STEP_COLUMNS = 3  # the most columns one step's bar takes
BARS = "▁▂▃▄▅▆▇█"  # the lowest is the baseline: 0 (and anything under 1/16 of the top)


def spark(values: Sequence[float | None], width: int) -> str:
    """A bar per value, up to ``STEP_COLUMNS`` wide (the maximum of each group when there are more
    values than ``width``),
    scaled from 0 to the largest value; an unknown value (None) is a space."""
    if width <= 0 or not values:
        return ""
    if len(values) > width:
        groups = [values[i * len(values) // width:(i + 1) * len(values) // width] for i in range(width)]
        values = [max((v for v in g if v is not None), default=None) for g in groups]
    top = max((v for v in values if v is not None), default=0) or 1
    per = max(1, min(STEP_COLUMNS, width // len(values)))  # a short run's bars, a little wider
    return "".join((" " if v is None else BARS[round(max(v, 0) / top * (len(BARS) - 1))]) * per for v in values)


class Spark(Widget):
    """A one-line sparkline from 0 (``spark``), as wide as the widget."""

    DEFAULT_CSS = "Spark { height: 1; color: $primary; }"
    data: reactive[tuple[float | None, ...]] = reactive(())

    def render(self) -> RenderResult:
        return Text(spark(self.data, self.size.width), no_wrap=True, overflow="crop")


def chart_captions(steps: Sequence[TimelineStep]) -> tuple[str, str]:
    context = [(s.context_tokens, s.step) for s in steps if s.context_tokens is not None]
    if context and max(context)[0] > 0:
        peak, at = max(context)
        # The last step's context, if known: a step whose model call failed sent a prompt of unknown size.
        last = steps[-1].context_tokens
        ctx = (f"context tokens per step: peak {fmt_int(peak)} at step {at}, "
               f"last {fmt_int(last) if last is not None else f'unknown (step {steps[-1].step})'}")
    else:
        ctx = "context tokens per step: none recorded"
    costs = [(s.cost_usd, s.step) for s in steps if s.cost_usd is not None]
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
        yield Spark(id="context-chart")
        yield Static(id="cost-caption", classes="caption")
        yield Spark(id="cost-chart")

    def show(self, steps: Sequence[TimelineStep]) -> None:
        ctx, cost = chart_captions(steps)
        self.query_one("#context-caption", Static).update(Text(ctx))
        self.query_one("#cost-caption", Static).update(Text(cost))
        self.query_one("#context-chart", Spark).data = tuple(s.context_tokens for s in steps)
        self.query_one("#cost-chart", Spark).data = tuple(s.cost_usd for s in steps)
