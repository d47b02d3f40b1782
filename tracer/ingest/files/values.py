"""Numbers and times as files write them, read honestly: what is missing or malformed is ``None``.

Stored times are naive UTC (the store's convention); a file's ISO time with an offset is converted,
one without is taken as UTC.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

__all__ = ["epoch_time", "iso_time", "number", "whole"]


def whole(value: Any) -> int | None:
    """A non-negative integer count, else None (booleans and floats with a fraction are not counts)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and 0 <= value < 1 << 62 else None


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def iso_time(value: Any) -> datetime | None:
    """``2026-01-02T03:04:05.6+00:00`` (or ``...Z``) as naive UTC, else None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except ValueError:
        return None
    return t.astimezone(timezone.utc).replace(tzinfo=None) if t.tzinfo else t


def epoch_time(value: Any) -> datetime | None:
    """Seconds since the epoch as naive UTC, else None."""
    seconds = number(value)
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None
