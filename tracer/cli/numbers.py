"""Numeric flags, checked where they are parsed: a value a command cannot honour is refused in one line.

``float("-1")``, ``float("nan")`` and ``int("-5")`` all parse, and a command that took them ran on
with a meaning nobody asked for (``view --refresh -1`` redrew in a tight loop at 100% CPU; a
negative settle time wrote every trace at once). Each flag states its range once, here, and
argparse prints ``argument --refresh: must be 0 (off) or at least 0.1, not '-1'``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["whole", "number", "seconds", "positive", "port", "port_or_off"]


def _number(text: str, kind: type) -> float:
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'a whole number' if kind is int else 'a number'}: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def whole(minimum: int = 0) -> Callable[[str], int]:
    """A whole number of at least ``minimum``."""
    def parse(text: str) -> int:
        value = int(_number(text, int))
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number of at least {minimum}, not {text!r}")
        return value
    parse.__name__ = "whole number"
    return parse


def number(minimum: float = 0.0) -> Callable[[str], float]:
    """A finite number of at least ``minimum``."""
    def parse(text: str) -> float:
        value = _number(text, float)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a number of at least {minimum:g}, not {text!r}")
        return value
    parse.__name__ = "number"
    return parse


def positive(text: str) -> float:
    """A finite number above 0."""
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text!r}")
    return value


def seconds(minimum: float = 0.0, *, off: bool = False) -> Callable[[str], float]:
    """Seconds: at least ``minimum``; with ``off``, 0 is also taken (it turns the thing off)."""
    def parse(text: str) -> float:
        value = _number(text, float)
        if off and value == 0:
            return 0.0
        if value < minimum:
            wanted = f"0 (off) or at least {minimum:g}" if off else f"at least {minimum:g}"
            raise argparse.ArgumentTypeError(f"must be {wanted} seconds, not {text!r}")
        return value
    parse.__name__ = "seconds"
    return parse


def port(text: str) -> int:
    """A TCP port, 0 (any free one) to 65535."""
    value = int(_number(text, int))
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0 to 65535)")
    return value


def port_or_off(text: str) -> int | None:
    """A port, or ``off``."""
    if text.strip().lower() in ("off", "none", "no"):
        return None
    try:
        return port(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0 to 65535, or off)") from None
