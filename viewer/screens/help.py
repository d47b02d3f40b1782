"""``?``: the keys of the screen underneath (from its live bindings) and what that screen shows.

Laid out to be read whole at 80x24: the keys flow in as many columns as the width takes
(``rich.columns.Columns``), the screen's notes are reflowed to the box's width, and the box is as
tall as its text, up to the screen (taller help scrolls inside it, with a scrollbar).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.columns import Columns
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

__all__ = ["HelpScreen", "key_rows", "reflow"]


def reflow(text: str) -> str:
    """Join a screen's hard-wrapped help lines into paragraphs, so they wrap at the box's width (80
    columns or 160); an indented line (an example) and a blank line keep their breaks."""
    lines: list[str] = []
    for line in text.splitlines():
        if lines and lines[-1] and not lines[-1][0].isspace() and line and not line[0].isspace():
            lines[-1] += " " + line
        else:
            lines.append(line)
    return "\n".join(lines)


def key_rows(screen: Screen[Any]) -> list[tuple[str, str]]:
    """(key, description) for the bindings active on ``screen`` that the footer shows.

    Hidden ones (a table's cursor keys, tab, a second key for the same action such as ctrl+enter
    beside ctrl+r) are the usual ones or are told in the screen's notes.
    """
    rows: list[tuple[str, str]] = []
    seen: set[str] = set()
    for active in screen.active_bindings.values():
        binding = active.binding
        if not binding.show or not binding.description or binding.action in seen:
            continue
        seen.add(binding.action)
        rows.append((screen.app.get_key_display(binding), binding.description))
    return rows


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, under: Screen[Any]) -> None:
        super().__init__()
        self.title_text = f"Keys: {getattr(under, 'NAME', '') or 'viewer'}"
        self.rows = key_rows(under)
        self.about = reflow(getattr(under, "HELP", ""))

    def compose(self) -> ComposeResult:
        width = max(len(key) for key, _ in self.rows) if self.rows else 0
        keys = Columns([Text.assemble((key.ljust(width), "bold cyan"), "  ", description)
                        for key, description in self.rows], padding=(0, 3))
        with VerticalScroll(id="help-box"):
            yield Static(Text.assemble((self.title_text, "bold"), ("   escape or ? closes this help", "dim")),
                         id="help-title")
            yield Static(keys, id="help-keys")
            if self.about:
                yield Static(Text(self.about), id="help-about")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)
