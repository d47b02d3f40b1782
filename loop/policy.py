"""The loop's policy: every cap and defence, with named defaults, in one plain dataclass."""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Policy", "DEFAULT_POLICY"]


@dataclass(frozen=True)
class Policy:
    max_iters: int = 30
    """Model calls the runtime allows before stopping with ``max_iters``."""
    budget_usd: float | None = None
    """Stop with ``budget_exceeded`` once the run's cost reaches this many dollars."""
    stagnation_window: int = 3
    """The same action this many times in a row is stagnation; so is a short cycle repeated
    ``stagnation_window - 1`` times (at least twice): A, B, A, B with the default 3."""
    max_reflections: int = 2
    """Reflection turns injected on stagnation before the run stops with ``stagnated``."""
    max_cycle_length: int = 3
    """Longest cycle of distinct actions (A, B, A, B, ...) that counts as stagnation."""
    max_observation_bytes: int = 12_000
    """Tool results longer than this are trimmed before the model sees them (None: never)."""
    compact_at_tokens: int | None = 60_000
    """Compact older turns into a summary once the context passes this many tokens (None: never)."""
    keep_recent_turns: int = 4
    """Assistant turns kept verbatim when compacting."""
    max_tokens: int = 2048
    """``max_tokens`` of each model call."""
    max_parallel_tools: int = 8
    """Tool calls of one response run at most this many at a time."""

    def with_(self, **changes: object) -> Policy:
        return replace(self, **changes)  # type: ignore[arg-type]


DEFAULT_POLICY = Policy()
