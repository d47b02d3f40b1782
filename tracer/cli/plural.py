"""``1 run``, ``2 runs``: counts in command output, with the noun agreeing."""

from __future__ import annotations

__all__ = ["plural", "count"]

# English plurals looptrace's output uses that are not noun + "s".
_IRREGULAR = {"diagnosis": "diagnoses", "was": "were", "is": "are", "entry": "entries", "its": "their"}


def plural(n: int, noun: str) -> str:
    """``noun`` agreeing with ``n`` (the noun alone; see ``count`` for ``"3 runs"``)."""
    if n == 1:
        return noun
    if noun in _IRREGULAR:
        return _IRREGULAR[noun]
    # The last word takes the plural: "model call" -> "model calls".
    head, _, last = noun.rpartition(" ")
    last = _IRREGULAR.get(last, last + ("es" if last.endswith(("s", "x", "ch", "sh")) else "s"))
    return f"{head} {last}" if head else last


def count(n: int, noun: str, *, thousands: bool = False) -> str:
    """``"1 run"``, ``"0 runs"``, ``"12,000 spans"`` (with ``thousands``)."""
    return f"{n:,} {plural(n, noun)}" if thousands else f"{n} {plural(n, noun)}"
