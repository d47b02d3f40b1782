"""Every threshold the rules use, with its named default; settable from the CLI or a TOML file.

One set for every user of the rules: the analyzer (``looptrace analyze``), the loop's own stop and a
live guard read the same names, so a threshold means the same thing wherever it is applied. A
threshold below 2 turns its repeat check off (one call is no repetition).

A config file holds an ``[analyzer]`` table whose keys are the field names below, e.g.::

    [analyzer]
    repeat_min = 5
    context_window = 32000
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

__all__ = ["Thresholds", "DEFAULT_THRESHOLDS", "load_thresholds"]


@dataclass(frozen=True)
class Thresholds:
    repeat_min: int = 5
    """stagnation: the same action (tool + arguments) this many times in a row with no new result."""
    fail_repeat_min: int = 3
    """stagnation: the same tool failing this many times in a row with the same error ("repeated
    failing calls", with or without the same arguments; chosen leave-one-source-out, docs/analyzer.md)."""
    cycle_repeats: int = 5
    """stagnation: a cycle of 2..cycle_max_period distinct actions repeated this many times."""
    cycle_max_period: int = 3
    """stagnation: the longest cycle looked for."""
    same_observation_min: int = 5
    """stagnation: this many consecutive actions returning the same observation ("no new information")."""
    same_observation_min_bytes: int = 64
    """stagnation: shorter observations ("OK", an empty output with its return code) are too generic
    to count as the same information."""
    near_same_min_bytes: int = 1000
    """stagnation: observations at least this long that differ only in their numbers are the same
    outcome (a file view whose line count changed); shorter ones are not (``40% done``, an exit code)."""
    context_window: int = 0
    """context_bomb: tokens of the window for models the trace and the family table (windows.py) do not
    know; 0 means none, so such runs get no window-ratio diagnosis."""
    context_near: float = 0.9
    """context_bomb: a context this share of the window counts as reaching it."""
    observation_share: float = 0.25
    """context_bomb: one observation adding this share of the window is a bomb."""
    growth_steps: int = 5
    """context_bomb: steps used to estimate the growth rate for the overflow projection."""
    hallucination_share: float = 0.5
    """hallucinated_tool: share of actions that call unknown tools, break the schema or cannot be parsed."""
    hallucination_min: int = 2
    """hallucinated_tool: at least this many such actions (unless one ends the run)."""
    chat_round_limit: int = 0
    """cap_hit: the round (message) limit your group chats run with (AG2's ``max_round``, which the
    files a user saves do not record); a chat with no recorded end whose message or turn count is
    this stopped at the limit. 0: none (a limit the run records itself is always read)."""


DEFAULT_THRESHOLDS = Thresholds()


def load_thresholds(path: str | Path | None = None, **overrides: Any) -> Thresholds:
    """Defaults, then the ``[analyzer]`` table of ``path``, then ``overrides`` (None values ignored)."""
    known = {f.name: f.type for f in fields(Thresholds)}
    values: dict[str, Any] = {}
    if path is not None:
        with open(path, "rb") as f:
            table = tomllib.load(f).get("analyzer", {})
        unknown = sorted(set(table) - set(known))
        if unknown:
            raise ValueError(f"{path}: unknown analyzer settings: {', '.join(unknown)}")
        values.update(table)
    values.update({k: v for k, v in overrides.items() if v is not None})
    for name, value in values.items():
        default = getattr(DEFAULT_THRESHOLDS, name)
        if isinstance(default, int) and not isinstance(value, int) or isinstance(default, float) and not isinstance(
                value, (int, float)):
            raise ValueError(f"analyzer setting {name} must be a number like {default!r}, got {value!r}")
        if isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise ValueError(f"analyzer setting {name} must be a finite number of at least 0, got {value!r}")
    return replace(DEFAULT_THRESHOLDS, **values)
