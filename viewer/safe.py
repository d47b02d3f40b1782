"""The one door trace text goes through before any widget sees it.

Agents and tools write arbitrary text: Rich/Textual markup (``[@click=app.quit]``), terminal
escape sequences, C1 controls, bidi overrides. ``safe`` escapes the control characters with
``tracer.textsafe.visible`` (the same rule as ``looptrace sql``) and builds a ``rich.text.Text``
directly, so nothing is ever parsed as markup. Widgets that would parse a plain ``str`` as markup
(``DataTable`` cells and column labels, ``Static``) are only ever handed these ``Text`` objects.
"""

from __future__ import annotations

from typing import Any

from rich.style import StyleType
from rich.text import Text

from looptrace.tracer.cli.table import cell_text
from looptrace.tracer.cli.terminal import visible

__all__ = ["safe", "safe_plain", "safe_cell", "clip"]


def clip(text: str, width: int | None) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis when cut."""
    if width is None or len(text) <= width:
        return text
    return text[: max(0, width - 1)] + "…"


def safe_plain(text: object, *, newlines: bool = True, width: int | None = None) -> str:
    """The characters ``safe`` shows for ``text``, as a str: to measure, or to style as a ``Text`` cell."""
    return "" if text is None else clip(visible(str(text), newlines=newlines), width)


def safe(text: object, *, newlines: bool = True, width: int | None = None, style: StyleType = "") -> Text:
    """Display text for ``text`` (None is empty): controls escaped, markup inert, optionally clipped."""
    if text is None:
        return Text("", style=style)
    return Text(safe_plain(text, newlines=newlines, width=width), style=style, end="")


def safe_cell(value: Any, *, width: int | None = 80) -> Text:
    """A query result value as one line of display text (numbers, dates, JSON as ``looptrace sql`` prints)."""
    return safe(cell_text(value), newlines=False, width=width)
