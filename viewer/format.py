"""Numbers, durations and JSON as the viewer shows them: pure functions over plain values."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

__all__ = [
    "UNKNOWN", "fmt_int", "fmt_compact", "fmt_cost", "fmt_seconds", "fmt_bytes", "fmt_time", "fmt_short_time",
    "short_args", "pretty_json", "evidence_lines", "call_error_kind", "unknown_or",
]


UNKNOWN = "-"  # a count or cost the store does not know (NULL): never shown as 0


def fmt_int(n: int | float | None) -> str:
    return UNKNOWN if n is None else f"{int(n):,}"


def unknown_or(n: int | float | None, fmt: Callable[[Any], str] = fmt_int) -> str:
    """A number in running text: the word "unknown" where a table cell would show ``UNKNOWN``."""
    return "unknown" if n is None else fmt(n)


def fmt_compact(n: int | float | None) -> str:
    """A count in at most 6 characters: 3,142 / 186k / 1.2M."""
    if n is None:
        return UNKNOWN
    if n < 10_000:
        return f"{int(n):,}"
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.1f}M"


def fmt_cost(usd: float | None) -> str:
    if usd is None:
        return UNKNOWN
    return f"${usd:.4f}" if usd < 100 else f"${usd:,.0f}"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def fmt_bytes(n: int | None) -> str:
    if not n:
        return ""
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # unreachable; keeps type checkers content


def fmt_time(when: datetime | None) -> str:
    return "" if when is None else when.isoformat(sep=" ", timespec="seconds")


def fmt_short_time(when: datetime | None) -> str:
    """Month, day, hours and minutes: enough to tell runs apart in a table."""
    return "" if when is None else when.strftime("%m-%d %H:%M")


def short_args(args: str | None, width: int = 48) -> str:
    """Tool arguments on one line: ``{"path": "a.txt"}`` becomes ``path=a.txt``."""
    if not args:
        return ""
    try:
        value = json.loads(args)
    except ValueError:
        text = args
    else:
        if isinstance(value, dict):
            text = " ".join(
                f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
                for k, v in value.items()
            )
        else:
            text = json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def pretty_json(text: str | None) -> str:
    """JSON text indented for reading; text that is not JSON (e.g. cut at the display cap) as is."""
    if text is None:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def evidence_lines(text: str | None) -> str:
    """A diagnosis's evidence (a JSON object) as ``key  value`` lines, values as compact JSON."""
    if not text:
        return ""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    width = max((len(str(k)) for k in value), default=0)
    return "\n".join(
        f"{str(k).ljust(width)}  {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}"
        for k, v in value.items()
    )


_NAME = re.compile(r"[A-Za-z_][\w.]*")
_STATUS = re.compile(r"\b(?:[Ee]rror code|[Ss]tatus(?: code)?|HTTP)[:= ]+(\d{3})\b")


def call_error_kind(error: str, width: int = 32) -> str:
    """A failed model call's error in a few words: ``ModelError: BadRequestError: Error code: 400 - {...}``
    becomes ``BadRequestError 400`` (the innermost exception name of the leading chain, and the HTTP status)."""
    name = None
    for part in error.split(": ")[:4]:  # "Outer: Inner: message": the names come first
        if not _NAME.fullmatch(part.strip()):
            break
        name = part.strip()
    status = _STATUS.search(error[:500])
    kind = " ".join(filter(None, (name, status.group(1) if status else None))) or " ".join(error.split())
    return kind if len(kind) <= width else kind[: width - 1] + "…"
