"""The step screen's redaction section: where secrets were replaced in this step, by which rule.

Read from the ``redactions`` view (the manifest the sink writes); it never holds a value, only the
field path and the rule, so a reader knows a placeholder is a redaction and not what the agent saw.
Field paths come from trace keys, so they are escaped like any trace text.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from ..safe import safe

__all__ = ["redactions_text"]


def redactions_text(rows: Sequence[tuple[str, str, int]], more: bool = False) -> Text:
    """``rows`` of (field path, rule, count) as lines; empty text when nothing was redacted."""
    if not rows:
        return Text()
    text = Text("\n\nredacted", style="bold underline")
    text.append(f"  {sum(n for _, _, n in rows)} values replaced before they were stored", style="dim")
    for field, rule, n in rows:
        text.append("\n  ").append_text(safe(field)).append("  ")
        text.append_text(safe(rule, style="magenta"))
        if n > 1:
            text.append(f" ×{n}", style="dim")
    if more:
        text.append(f"\n  … more than {len(rows)} fields: SELECT * FROM redactions", style="yellow")
    return text
