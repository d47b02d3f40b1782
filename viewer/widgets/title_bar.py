"""The top line of every screen: where you are, in plain text (paths are escaped like trace text)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ..safe import safe

__all__ = ["TitleBar"]


class TitleBar(Static):
    def __init__(self, *parts: str, id: str | None = None) -> None:
        super().__init__(id=id)
        self.parts = parts

    def on_mount(self) -> None:
        self.set_parts(*self.parts)

    def set_parts(self, *parts: str) -> None:
        text = Text("looptrace", style="bold")
        for part in parts:
            text.append("  ›  ", style="dim")
            text.append_text(safe(part, newlines=False, width=80))
        self.update(text)
