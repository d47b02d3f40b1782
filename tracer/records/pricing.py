"""USD prices per million tokens, by model, and the cost of one model call.

Prices change; users add or override entries with ``set_price``. A model matches the longest
registered prefix, so ``claude-sonnet-4-5-20250929`` is priced by ``claude-sonnet-4-5``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from threading import Lock
from typing import Any

__all__ = ["Price", "PRICES", "set_price", "price_of", "cost_usd", "Usage", "usage_of"]


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_write: float
    cache_read: float


# USD per million tokens (list prices as published by Anthropic; 5-minute cache writes).
PRICES: dict[str, Price] = {
    "claude-opus-4": Price(15.0, 75.0, 18.75, 1.50),
    "claude-opus-4-5": Price(5.0, 25.0, 6.25, 0.50),
    "claude-sonnet-4": Price(3.0, 15.0, 3.75, 0.30),
    "claude-3-7-sonnet": Price(3.0, 15.0, 3.75, 0.30),
    "claude-3-5-sonnet": Price(3.0, 15.0, 3.75, 0.30),
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
    "claude-3-haiku": Price(0.25, 1.25, 0.30, 0.03),
    # The bundled scripted model is priced like a mid-size model so budgets behave realistically.
    "scripted": Price(3.0, 15.0, 3.75, 0.30),
}
_lock = Lock()


def set_price(model_prefix: str, price: Price) -> None:
    with _lock:
        PRICES[model_prefix] = price


def price_of(model: str | None) -> Price | None:
    if not model:
        return None
    best = max((p for p in PRICES if model.startswith(p)), key=len, default=None)
    return PRICES[best] if best else None


def cost_usd(
    model: str | None,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_tokens: int = 0,
    cache_creation_tokens: int = 0,
) -> float:
    """Cost of one call. ``input_tokens`` excludes cache reads and writes, as Anthropic reports it."""
    price = price_of(model)
    if price is None:
        return 0.0
    return (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_creation_tokens * price.cache_write
        + cache_read_tokens * price.cache_read
    ) / 1_000_000


@dataclass(frozen=True)
class Usage:
    """A response's token usage as Anthropic reports it (``input_tokens`` excludes the cache)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0

    @property
    def total_input(self) -> int:
        """Input tokens as the OTel GenAI conventions count them: cache reads and writes included."""
        return self.input_tokens + self.cache_read_tokens + self.cache_creation_tokens

    def cost(self, model: str | None) -> float:
        return cost_usd(model, input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                        cache_read_tokens=self.cache_read_tokens, cache_creation_tokens=self.cache_creation_tokens)


def usage_of(response: Mapping[str, Any]) -> Usage:
    u = response.get("usage") or {}
    return Usage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0),
                 int(u.get("cache_read_input_tokens") or 0), int(u.get("cache_creation_input_tokens") or 0))
