"""Scrollbars drawn as whole cells: the thumb is a block of colour, with no partial-block glyphs.

Textual draws a thumb's ends with the eighth blocks ``▁▂▃▄▅▆▇`` (and ``▉▊▋▌▍▎▏`` across), the same
glyphs as a sparkline: beside a panel's text at 80x24 they read as stray chart bars mid-row (issue 28).
Whole cells lose an eighth of a cell of precision and nothing else. Textual's documented way to change
the look is to set ``ScrollBar.renderer``; the viewer is the only Textual app looptrace runs.
"""

from __future__ import annotations

from typing import ClassVar

from textual.scrollbar import ScrollBar, ScrollBarRender

__all__ = ["WholeCellScrollBar", "use_whole_cell_scrollbars"]


class WholeCellScrollBar(ScrollBarRender):
    VERTICAL_BARS: ClassVar[list[str]] = [" "] * 8
    HORIZONTAL_BARS: ClassVar[list[str]] = [" "] * 8


def use_whole_cell_scrollbars() -> None:
    ScrollBar.renderer = WholeCellScrollBar
