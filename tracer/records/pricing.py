"""USD prices per million tokens, by model, and the cost of one model call.

Prices change; users add or override entries with ``set_price`` in Python, or for ``looptrace collect`` and
``import`` with a JSON file named by ``LOOPTRACE_PRICES``: ``{"model-prefix": [input, output, cache_write,
cache_read], ...}`` (docs/frameworks.md). A model matches the longest registered prefix, so
``claude-sonnet-4-5-20250929`` is priced by ``claude-sonnet-4-5`` and ``gpt-4o-mini-2024-07-18`` by
``gpt-4o-mini``. A model with no price has no cost: callers record NULL, never 0 (``price_of`` is None).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from threading import Lock
from typing import Any

__all__ = ["Price", "PRICES", "PRICES_ENV", "set_price", "load_prices", "price_of", "cost_usd", "counted_cost", "Usage",
           "usage_of", "stop_reason_of"]

log = logging.getLogger("looptrace.pricing")
PRICES_ENV = "LOOPTRACE_PRICES"


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
    "claude-opus-4-1": Price(15.0, 75.0, 18.75, 1.50),
    "claude-sonnet-4-5": Price(3.0, 15.0, 3.75, 0.30),
    "claude-3-opus": Price(15.0, 75.0, 18.75, 1.50),
    # OpenAI list prices (standard tier). OpenAI charges no cache writes: written tokens cost as input.
    "gpt-5": Price(1.25, 10.0, 1.25, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.25, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.05, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 2.0, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.40, 0.10),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.10, 0.025),
    "gpt-4o": Price(2.50, 10.0, 2.50, 1.25),
    "gpt-4o-mini": Price(0.15, 0.60, 0.15, 0.075),
    "o1": Price(15.0, 60.0, 15.0, 7.50),
    "o1-mini": Price(1.10, 4.40, 1.10, 0.55),
    "o3": Price(2.0, 8.0, 2.0, 0.50),
    "o3-mini": Price(1.10, 4.40, 1.10, 0.55),
    "o3-pro": Price(20.0, 80.0, 20.0, 20.0),
    "o4-mini": Price(1.10, 4.40, 1.10, 0.275),
    # The bundled scripted model is priced like a mid-size model so budgets behave realistically.
    "scripted": Price(3.0, 15.0, 3.75, 0.30),
}
_lock = Lock()


def set_price(model_prefix: str, price: Price) -> None:
    with _lock:
        PRICES[model_prefix] = price


def load_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """Prices from a JSON file ``{"model-prefix": [input, output, cache_write, cache_read]}`` (USD per
    million tokens), registered with ``set_price``. A malformed file raises ValueError naming the entry."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected an object of model prefix -> [input, output, cache_write, cache_read]")
    prices = {}
    for prefix, values in data.items():
        if not (isinstance(values, list) and len(values) == 4
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in values)):
            raise ValueError(f"{path}: {prefix!r} needs four non-negative numbers "
                             f"[input, output, cache_write, cache_read], got {values!r}")
        prices[prefix] = Price(*(float(v) for v in values))
    for prefix, price in prices.items():
        set_price(prefix, price)
    return prices


_env_loaded = False


def _load_env() -> None:
    """The file named by ``LOOPTRACE_PRICES``, once. A bad file is logged, never raised into a caller."""
    global _env_loaded
    _env_loaded = True
    path = os.environ.get(PRICES_ENV)
    if path:
        try:
            load_prices(path)
        except (OSError, ValueError) as err:
            log.warning("looptrace: %s=%s ignored: %s", PRICES_ENV, path, err)


def price_of(model: str | None) -> Price | None:
    if not _env_loaded:
        _load_env()
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


def counted_cost(model: object, input_tokens: int | None, output_tokens: int | None, cache_read_tokens: int | None,
                 cache_creation_tokens: int | None) -> float | None:
    """The cost of a call whose tokens are counted the store's way (``input_tokens`` includes the cache
    reads and writes, as the OTel GenAI conventions count them), or None: no model, no usage, or a model
    with no price. Every source that records tokens without a cost (OTLP spans, imported logs) prices
    them here."""
    if not isinstance(model, str) or (input_tokens is None and output_tokens is None):
        return None
    read, write = cache_read_tokens or 0, cache_creation_tokens or 0
    cost = cost_usd(model, input_tokens=max(0, (input_tokens or 0) - read - write), output_tokens=output_tokens or 0,
                    cache_read_tokens=read, cache_creation_tokens=write)
    # An unpriced model costs 0.0 too: only then is the price table searched a second time (a search
    # is a scan of every priced prefix).
    return None if cost == 0.0 and price_of(model) is None else cost


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
    """A response's usage in Anthropic's terms, from a Messages, Chat Completions or Responses body.

    OpenAI counts cached tokens inside its input count (``prompt_tokens``, Responses' ``input_tokens``
    with ``input_tokens_details``); they are moved to ``cache_read_tokens``, as Anthropic reports them."""
    u = response.get("usage") or {}
    openai = "prompt_tokens" in u or "input_tokens_details" in u
    if openai:
        details = u.get("prompt_tokens_details") or u.get("input_tokens_details") or {}
        cached = int(details.get("cached_tokens") or 0)
        total = int(u.get("prompt_tokens") if "prompt_tokens" in u else u.get("input_tokens") or 0)
        output = int(u.get("completion_tokens") if "completion_tokens" in u else u.get("output_tokens") or 0)
        return Usage(max(0, total - cached), output, cached, 0)
    return Usage(int(u.get("input_tokens") or 0), int(u.get("output_tokens") or 0),
                 int(u.get("cache_read_input_tokens") or 0), int(u.get("cache_creation_input_tokens") or 0))


def stop_reason_of(response: Mapping[str, Any]) -> str | None:
    """Why the model stopped: Messages ``stop_reason``, Chat Completions ``finish_reason``, Responses ``status``."""
    if response.get("stop_reason"):
        return str(response["stop_reason"])
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) and choices[0].get("finish_reason"):
        return str(choices[0]["finish_reason"])
    if response.get("object") == "response" and response.get("status"):
        return str(response["status"])
    return None
