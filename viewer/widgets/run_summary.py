"""A run's header: agent, status, task and totals, and its links to other runs.

The first line's fields (agent, status, run id, model, start) are laid out for the widget's width:
a field that does not fit moves to the next line whole, rather than a date wrapping away from its
time (``started 2026-12-04`` / ``21:09:59`` at 120 columns).
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import Static

from ..badges import status_badge
from ..data import RunDetail
from ..format import fmt_cost, fmt_int, fmt_seconds, fmt_time
from ..safe import safe

__all__ = ["RunSummary", "summary_text", "packed"]


def packed(fields: list[Text], width: int | None, sep: str = "  ") -> Text:
    """``fields`` joined by ``sep`` on lines of at most ``width`` cells, none split between lines
    (one wider than a line alone wraps as any text does)."""
    text, line = Text(), 0
    for field in fields:
        if line and width is not None and line + len(sep) + field.cell_len > width:
            text.append("\n")
            line = 0
        elif line:
            text.append(sep)
            line += len(sep)
        text.append_text(field)
        line += field.cell_len
    return text


def summary_text(d: RunDetail, width: int | None = None) -> Text:
    r = d.run
    text = packed([
        safe(r.agent, newlines=False, width=60, style="bold"), status_badge(r.status, solid=True),
        Text.assemble(("run ", "dim"), safe(r.run_id, newlines=False)),
        Text.assemble(("model ", "dim"), safe(r.model, newlines=False, width=40)),
        Text.assemble(("started ", "dim"), fmt_time(r.started_at)),
    ], width)
    text.append("\ntask  ", style="dim")
    text.append_text(safe(r.task, newlines=False, width=300))
    # A run with steps and no model call recorded made calls its source did not keep (an imported
    # transcript): "0 model calls" would read as none made.
    calls = "no model calls recorded" if not r.n_llm_calls and r.n_steps else f"{fmt_int(r.n_llm_calls)} model calls"
    text.append(
        f"\n{fmt_int(r.n_steps)} steps · {calls}"
        f" · tokens {fmt_int(r.input_tokens)} in / {fmt_int(r.output_tokens)} out"
        f" · {fmt_cost(r.cost_usd)} · {fmt_seconds(r.seconds)}"
    )
    missing = [s.step for s in d.steps if s.call_missing]
    if missing:  # a span batch the client dropped: those steps are read from later requests
        shown = ", ".join(map(str, missing[:5])) + (", …" if len(missing) > 5 else "")
        text.append(f"\n{len(missing)} model call{'s' if len(missing) != 1 else ''} missing from the trace"
                    f" (step{'s' if len(missing) != 1 else ''} {shown}): their steps are read from later requests",
                    style="bold yellow")
    if d.children:
        text.append(f" · {d.children} child run{'s' if d.children != 1 else ''} (c)")
    if d.more_steps:
        text.append(f" · timeline shows the first {len(d.steps):,} steps", style="yellow")
    links = [("parent", r.parent_run_id), ("replay of", r.replay_of), ("forked from", r.forked_from)]
    for name, value in links:
        if value:
            text.append(f"\n{name} ", style="dim")
            text.append_text(safe(value, newlines=False))
            if name == "forked from" and r.fork_step is not None:
                text.append(f" at step {r.fork_step}", style="dim")
    if r.error:
        text.append("\nerror  ", style="bold red")
        text.append_text(safe(r.error, newlines=False, width=300))
    elif r.answer:
        text.append("\nanswer  ", style="dim")
        text.append_text(safe(r.answer, newlines=False, width=300))
    return text


class RunSummary(Static):
    _detail: RunDetail | None = None

    def show(self, detail: RunDetail) -> None:
        self._detail = detail
        self.update(summary_text(detail, self.content_region.width or None))

    def on_resize(self, event: events.Resize) -> None:
        if self._detail is not None:
            self.update(summary_text(self._detail, self.content_region.width or None))
