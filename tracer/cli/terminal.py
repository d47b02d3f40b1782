"""What reaches a terminal: trace text with its control characters shown, never obeyed.

Trace text comes from models and tools; an ESC sequence in a thought must never reach the
terminal. Every command that prints trace text, and the viewer, show it through ``visible``.
"""

from __future__ import annotations

import re

from ..records.unicode import clean_text

__all__ = ["visible"]

# C0 and C1 controls (but tab and newline), DEL, and the bidi overrides and isolates that can
# reorder what a terminal shows.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = True) -> str:
    """``text`` safe to print to a terminal: control and bidi characters shown as escapes.

    Trace text comes from models and tools; an ESC sequence in it must never reach the terminal.
    The stored text is unchanged: this is for display only.
    """
    out = _UNSAFE.sub(_escape, clean_text(text))
    return out if newlines else out.replace("\n", "\\n").replace("\t", "\\t")
