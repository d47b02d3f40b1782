"""Numbers, durations and JSON as the viewer shows them: pure functions over plain values."""

from __future__ import annotations

import json
from datetime import datetime

__all__ = ["fmt_int", "fmt_cost", "fmt_seconds", "fmt_bytes", "fmt_time", "short_args", "pretty_json"]


def fmt_int(n: int | float | None) -> str:
    return "" if n is None else f"{int(n):,}"


def fmt_cost(usd: float | None) -> str:
    if usd is None:
        return ""
    return f"${usd:.4f}" if usd < 100 else f"${usd:,.0f}"


def fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
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
                f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in value.items()
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
