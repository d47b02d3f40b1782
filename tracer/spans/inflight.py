"""The model call under way while a client's own method runs, and what the client does meanwhile.

A client instrumentor wraps a request method (client.py); inside it the SDK may retry (429, 5xx, a
dropped connection) and may trace (the anthropic SDK's own span). Both need to know which call is
under way: ``InCall`` makes it known for the method's duration, to the retry hook always, and to
OpenTelemetry (as the current span) only when the client's own spans are recorded, since the SDK
otherwise builds a non-recording span of it per call only to send ``traceparent`` headers. The SDKs
(anthropic, openai) sleep in ``_sleep_for_retry`` before each retry: wrapping it counts the retry on
the call, so ``llm_calls.retries`` is right with or without the SDK's span.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

if TYPE_CHECKING:
    from .manual import LlmCall

__all__ = ["InCall", "calling_now", "counting_retries", "counting_retries_async", "retry_patches"]

Patch = tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]


# The model call under way in this context, while the client's own method runs: the client's retry
# hook (``counting_retries``) counts its retries on it.
_calling: ContextVar[LlmCall | None] = ContextVar("looptrace_client_call", default=None)


def calling_now() -> LlmCall | None:
    """The call whose client method is running in this context, if any."""
    return _calling.get()


class InCall:
    """The call current while its client method runs: for the retry hook always; as OpenTelemetry's
    current span only when ``parent`` (something records spans the client makes under it)."""

    __slots__ = ("_call", "_parent", "_token", "_otel")

    def __init__(self, call: LlmCall | None, parent: bool) -> None:
        self._call, self._parent = call, parent

    def __enter__(self) -> None:
        self._token = _calling.set(self._call)
        self._otel = (otel_context.attach(trace.set_span_in_context(self._call.span))
                      if self._parent and self._call is not None else None)

    def __exit__(self, et: Any, ev: BaseException | None, tb: Any) -> None:
        if self._otel is not None:
            otel_context.detach(self._otel)
        _calling.reset(self._token)
        # What ``trace.use_span`` did with an error the call raised, whether or not the span was current.
        if isinstance(ev, Exception) and self._call is not None and self._call.span.is_recording():
            self._call.span.record_exception(ev)
            self._call.span.set_status(Status(StatusCode.ERROR, f"{type(ev).__name__}: {ev}"))


def _retried(kwargs: Mapping[str, Any]) -> None:
    call = calling_now()
    if call is None:
        return
    try:
        response = kwargs.get("response")
        status = getattr(response, "status_code", None)
        call.retry(int(kwargs.get("retries_taken", call.retries)) + 1,
                   f"HTTP {status}" if status is not None else "connection error")
    except Exception:  # noqa: BLE001 - telemetry never breaks the agent
        pass


def counting_retries(original: Callable[..., Any]) -> Callable[..., Any]:
    def sleep_for_retry(client: Any, *args: Any, **kwargs: Any) -> Any:
        _retried(kwargs)
        return original(client, *args, **kwargs)

    return sleep_for_retry


def counting_retries_async(original: Callable[..., Any]) -> Callable[..., Any]:
    async def sleep_for_retry(client: Any, *args: Any, **kwargs: Any) -> Any:
        _retried(kwargs)
        return await original(client, *args, **kwargs)

    return sleep_for_retry


def retry_patches(sync_client: type, async_client: type) -> list[Patch]:
    """The patches that count an SDK's retries: its clients' ``_sleep_for_retry`` (anthropic, openai),
    where a client class defines it (an SDK without it keeps its retries uncounted, as before)."""
    return [(cls, "_sleep_for_retry", make) for cls, make in ((sync_client, counting_retries),
                                                              (async_client, counting_retries_async))
            if "_sleep_for_retry" in cls.__dict__]
