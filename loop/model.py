"""The model seam, and the Anthropic Messages API model with retries.

The loop talks to a ``Model``: a request dict in, a response message dict out. ``AnthropicModel``
is the one that ships; it streams through the real ``anthropic`` SDK (so a mid-stream error event is
seen as one), and owns retries: the SDK's own retries are off so every retry is a traced event with
its wait. Transient failures (429, 529, 5xx, timeouts, dropped connections, an error event mid
stream) back off exponentially with jitter, honouring ``retry-after``; anything else is final.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anthropic

__all__ = ["Model", "ModelError", "RetryPolicy", "AnthropicModel", "OnRetry"]

OnRetry = Callable[[int, BaseException, float], None]


class ModelError(Exception):
    """A model call failed for good. ``status`` is the run status it implies."""

    def __init__(self, message: str, *, status: str = "error", retries: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.retries = retries


class Model(Protocol):
    name: str

    def complete(self, request: Mapping[str, Any], on_retry: OnRetry | None = None) -> dict[str, Any]: ...


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.25  # +/- this fraction of the delay, so parallel agents do not retry in step

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_delay)
        raw = self.base_delay * (2 ** (attempt - 1))
        return min(self.max_delay, max(0.0, raw * (1 + random.uniform(-self.jitter, self.jitter))))


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _is_transient(exc: BaseException) -> bool:
    response = getattr(exc, "response", None)
    if response is not None and response.headers.get("x-should-retry") == "false":
        return False  # the server says a retry cannot help
    if isinstance(exc, (anthropic.APITimeoutError, anthropic.APIConnectionError)):
        return True
    if isinstance(exc, anthropic.APIStatusError):
        if exc.status_code == 200:  # an error event inside a stream that had started fine
            return getattr(exc, "type", None) in (None, "overloaded_error", "api_error", "rate_limit_error")
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def _final_status(exc: BaseException) -> str:
    text = str(exc).lower()
    if isinstance(exc, anthropic.BadRequestError) and (
            "too long" in text or "context" in text and ("window" in text or "limit" in text)):
        return "context_overflow"
    return "error"


class AnthropicModel:
    def __init__(
        self,
        model: str,
        *,
        client: anthropic.Anthropic | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float = 120.0,
        stream: bool = True,
    ) -> None:
        self.name = model
        self.client = client or anthropic.Anthropic(api_key=api_key, base_url=base_url, max_retries=0,
                                                    timeout=timeout)
        self.retry = retry
        self.stream = stream

    def complete(self, request: Mapping[str, Any], on_retry: OnRetry | None = None) -> dict[str, Any]:
        attempt = 0
        while True:
            try:
                return self._once(request)
            except anthropic.APIError as exc:
                attempt += 1
                if not _is_transient(exc) or attempt > self.retry.max_retries:
                    raise ModelError(f"{type(exc).__name__}: {exc}", status=_final_status(exc),
                                     retries=attempt - 1) from exc
                wait = self.retry.delay(attempt, _retry_after(exc))
                if on_retry is not None:
                    on_retry(attempt, exc, wait)
                time.sleep(wait)

    def _once(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self.stream:
            with self.client.messages.stream(**request) as stream:
                message = stream.get_final_message()
        else:
            message = self.client.messages.create(**request)
        return message.model_dump(mode="json", exclude_none=True)
