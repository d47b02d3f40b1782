"""One step in full: thought, each tool call (pretty arguments, observation), model calls, events.

Text arrives already cut to ``data.TEXT_CAP`` characters per field; what was cut is announced
where it was cut ("N bytes not shown") and the whole text is one key away in ``$PAGER``. A step
with many parallel calls also shares a display budget, so the view stays quick to lay out.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ..badges import status_badge
from ..data import TEXT_CAP, ModelCall, StepDetail, ToolCallDetail
from ..format import fmt_bytes, fmt_cost, fmt_int, fmt_time, pretty_json, unknown_or
from ..safe import safe, safe_plain
from .redaction_list import redactions_text

__all__ = ["StepView", "step_text", "DISPLAY_BUDGET"]

DISPLAY_BUDGET = 4 * TEXT_CAP  # characters of observations shown for one step, all calls together


RULE = 64  # a heading's full width when the view's width is not known yet


def _heading(title: str, width: int = RULE) -> Text:
    # The rule stops short of the view's width: a heading that wraps reads as two broken dividers.
    return Text(f"\n── {title} ", style="bold cyan").append("─" * max(0, width - len(title) - 4), style="dim cyan")


def _cut_notice(hidden: int) -> Text:
    return Text(f"\n… {hidden:,} bytes not shown: press o to open the whole text in $PAGER",
                style="bold yellow")


def _field(value: str | None, total_bytes: int, budget: int | None = None) -> Text:
    shown = value or ""
    if budget is not None and len(shown) > budget:
        shown = shown[:budget]
    text = Text("\n").append_text(safe(shown))
    hidden = total_bytes - len(shown.encode())
    if hidden > 0:
        text.append_text(_cut_notice(hidden))
    return text


def _call(c: ToolCallDetail, budget: int, width: int, no_call: str = "no tool call (final answer)") -> Text:
    # The tool name is trace text: escaped like the rest (an OSC title sequence here set the terminal's title).
    title = f"call {c.call_index}: {safe_plain(c.tool, newlines=False, width=80)}" if c.tool is not None else no_call
    text = _heading(title, width)
    if c.tool_call_id:
        text.append("\nid ", style="dim").append_text(safe(c.tool_call_id, newlines=False))
    if c.is_error:
        text.append("\n").append_text(status_badge("error", solid=True)).append(" ")
        text.append_text(safe(c.error_type or "error", newlines=False, style="bold red"))
    if c.args is not None:
        text.append("\narguments", style="dim")
        cut = c.args_bytes > len(c.args.encode())
        text.append_text(_field(c.args if cut else pretty_json(c.args), c.args_bytes if cut else 0))
    if c.observation is not None or c.observation_bytes:
        text.append(f"\nobservation ({fmt_bytes(c.observation_bytes) or '0 B'})", style="dim")
        text.append_text(_field(c.observation, c.observation_bytes, budget))
    return text


def _model_call(m: ModelCall) -> Text:
    text = Text("\n")
    text.append_text(safe(m.model, newlines=False))
    if m.response_model and m.response_model != m.model:
        text.append(" → ").append_text(safe(m.response_model, newlines=False))
    if m.error:  # no response: a failed call, never a stop reason, and no usage to show
        text.append(" · ").append(" failed ", style="bold black on red")
        text.append(f" · {m.retries or 0} retries · latency {fmt_int(m.latency_ms)} ms")
        text.append("\nerror ", style="bold red").append_text(safe(m.error))
        if m.input_tokens is None and m.output_tokens is None:
            text.append(f"\ntokens unknown · cost {unknown_or(m.cost_usd, fmt_cost)}", style="dim")
            return text
    else:
        text.append(" · stop ").append_text(safe(m.stop_reason or "?", newlines=False, style="bold"))
        text.append(f" · {m.retries or 0} retries · {unknown_or(m.cost_usd, fmt_cost)}"
                    f" · latency {fmt_int(m.latency_ms)} ms")
    text.append(
        f"\ntokens {unknown_or(m.input_tokens)} in / {unknown_or(m.output_tokens)} out"
        f" (cache read {unknown_or(m.cache_read_tokens)}, cache write {unknown_or(m.cache_creation_tokens)})"
    )
    return text


def _no_call_title(d: StepDetail) -> str:
    """What a step without a tool call is: an answer, unless its model call failed or was lost."""
    if d.model_calls and all(m.error for m in d.model_calls):
        return "no tool call: the model call failed"
    if d.call_missing:
        return "no tool call recorded: the model call is missing"
    return "no tool call (final answer)"


def _usage(d: StepDetail) -> str:
    if d.input_tokens is None and d.output_tokens is None:
        tokens = "tokens unknown"
    else:
        tokens = f"tokens {unknown_or(d.input_tokens)} in / {unknown_or(d.output_tokens)} out"
    cost = fmt_cost(d.cost_usd) if d.cost_usd is not None else "cost unknown"
    return f"{tokens} · context {unknown_or(d.context_tokens)} · {cost}"


def step_text(d: StepDetail, width: int = RULE) -> Text:
    """The step as one text; ``width`` is the columns it is shown in (headings fit in it)."""
    text = Text(f"step {d.step}", style="bold")
    text.append(f"  {fmt_time(d.started_at)} · {_usage(d)}", style="dim")
    if d.hidden_bytes:
        text.append_text(_cut_notice(d.hidden_bytes))
    text.append_text(_heading("thought", width))
    text.append_text(_field(d.thought, d.thought_bytes) if d.thought else Text("\n(none)", style="dim"))
    budget = DISPLAY_BUDGET
    for c in d.calls:
        text.append_text(_call(c, max(0, budget), width, _no_call_title(d)))
        budget -= len(c.observation or "")
    if d.more_calls:
        text.append(f"\n… more than {len(d.calls)} tool calls: the rest are in the pager (o)", style="yellow")
    text.append_text(_heading("model call", width))
    if d.call_missing:
        text.append("\nmissing: the trace lost this step's model call (a span batch that never arrived); the step"
                    " is read from the next call's request, and its tokens and cost are unknown", style="bold yellow")
    elif not d.model_calls:
        text.append("\n(none recorded)", style="dim")
    for m in d.model_calls:
        text.append_text(_model_call(m))
    if d.more_model_calls:
        text.append(f"\n… more than {len(d.model_calls)} model calls", style="yellow")
    if d.events and d.events not in ("[]", "null"):
        text.append_text(_heading("events", width))
        text.append("\n").append_text(safe(pretty_json(d.events)))
    text.append_text(redactions_text(d.redactions, d.more_redactions))
    return text


class StepView(VerticalScroll):
    _detail: StepDetail | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…", style="dim"), id="step-text")

    def _width(self) -> int:
        # The room the text has: the view less its padding and a vertical scrollbar, kept to RULE.
        width = self.scrollable_content_region.width - self.styles.scrollbar_size_vertical
        return min(RULE, width) if width > 8 else RULE

    def show(self, detail: StepDetail | None, missing: str = "no such step") -> None:
        self._detail = detail
        body = step_text(detail, self._width()) if detail is not None else Text(missing, style="dim")
        self.query_one("#step-text", Static).update(body)
        self.scroll_home(animate=False)

    def on_resize(self) -> None:
        if self._detail is not None:
            self.query_one("#step-text", Static).update(step_text(self._detail, self._width()))
