"""Coloured badges for run statuses and diagnosis labels (Rich ``Text``, built through ``safe``)."""

from __future__ import annotations

from rich.text import Text

from .safe import safe

__all__ = ["status_badge", "label_badge", "STATUS_COLOURS", "LABEL_COLOURS"]

STATUS_COLOURS = {
    "ok": "green",
    "running": "bright_blue",
    "incomplete": "cyan",
    "stagnated": "yellow",
    "max_iters": "dark_orange",
    "budget_exceeded": "dark_orange",
    "context_overflow": "magenta",
    "tool_error": "red",
    "error": "red",
    "interrupted": "red",
}

LABEL_COLOURS = {
    "ok": "green",
    "stagnation": "yellow",
    "context_bomb": "magenta",
    "cap_hit": "dark_orange",
    "hallucinated_tool": "red",
    "error": "red",
    "incomplete": "cyan",
}


def _badge(text: str | None, colour: str | None, solid: bool) -> Text:
    if not text:
        return Text("")
    colour = colour or "white"
    if solid:  # a block of colour, for headers; plain coloured text inside tables
        return safe(f" {text} ", newlines=False, width=26, style=f"bold black on {colour}")
    return safe(text, newlines=False, width=24, style=f"bold {colour}")


def status_badge(status: str | None, *, solid: bool = False) -> Text:
    return _badge(status, STATUS_COLOURS.get(status or ""), solid)


def label_badge(label: str | None, others: int = 0, *, solid: bool = False) -> Text:
    badge = _badge(label, LABEL_COLOURS.get(label or ""), solid)
    if others:
        badge.append(f" +{others}", style="dim")
    return badge
