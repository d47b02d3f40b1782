"""Instrumenting the ``anthropic`` client: agents looptrace did not write, traced by their model calls.

``AnthropicInstrumentor`` wraps ``Messages.create`` (sync and async, streamed or not) and
``Messages.stream`` with a ``chat {model}`` span that records what replay needs and the SDK's own
span lacks: the whole request (system prompt, tools, parameters, stored as a delta against the
previous call) and the whole response, and the SDK's retries (counted as its retry sleep begins).
The SDK's own ``anthropic.messages.create`` span (made when the client has a tracer provider: ours,
given as ``open_telemetry={"tracer_provider": ...}``, or a global one) nests under it and keeps the
HTTP details (status, resend count, request id). With no provider the chat span is not made current
during the call: the SDK would make a non-recording span of it only to send ``traceparent`` headers.

The recording (implicit runs, tool results, streams, the guard) is the core every client instrumentor
shares (``client.py``); this module is the Messages API's dialect and the methods to patch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry import trace

from . import conversation as conv
from .client import Accumulator, ClientInstrumentor, Done
from .inflight import retry_patches
from .manual import LlmCall

__all__ = ["AnthropicInstrumentor", "MessagesDialect", "pair_results"]


def _declared(request: dict[str, Any]) -> frozenset[str] | None:
    tools = request.get("tools")
    if not isinstance(tools, (list, tuple)):
        return None
    return frozenset(str(t.get("name")) for t in tools if isinstance(t, dict) and t.get("name"))


class MessagesDialect:
    """The Messages API's requests and responses (``conversation.py`` reads them)."""

    provider = "anthropic"

    def request(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return dict(kwargs)

    def messages(self, request: dict[str, Any]) -> list[Any]:
        return list(request.get("messages") or [])

    def declared(self, request: dict[str, Any]) -> frozenset[str] | None:
        return _declared(request)

    def plain(self, response: Any) -> dict[str, Any]:
        return response.model_dump(mode="json") if hasattr(response, "model_dump") else dict(response)

    def text(self, response: dict[str, Any]) -> str:
        return conv.response_text(response)

    def tool_uses(self, response: dict[str, Any]) -> list[tuple[str, str, Any]]:
        return [(str(u.get("id") or ""), str(u.get("name")), u.get("input")) for u in conv.tool_uses(response)]

    def results(self, use_ids: list[str], messages: Sequence[Any]) -> list[tuple[str, str, bool]]:
        return pair_results(use_ids, list(messages))

    def first_user_text(self, messages: Sequence[Any]) -> str | None:
        return conv.first_user_text(messages)

    def truncated(self, response: dict[str, Any]) -> bool:
        return response.get("stop_reason") == "max_tokens"


class AnthropicInstrumentor(ClientInstrumentor):
    """``AnthropicInstrumentor(tracing, agent=..., guard=...).instrument()``; ``uninstrument()`` restores
    the client. ``agent`` names the runs it makes (default ``anthropic-client``)."""

    dialect = MessagesDialect()
    default_agent = "anthropic-client"

    def _patches(self) -> list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
        from anthropic.resources.messages import AsyncMessages, Messages

        from anthropic._base_client import AsyncAPIClient, SyncAPIClient

        patches: list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
            (Messages, "create", lambda o: self.wrap(o, _MessageEvents)),
            (AsyncMessages, "create", lambda o: self.wrap_async(o, _MessageEvents)),
            (Messages, "stream", self._wrap_stream)]
        # The SDK retries inside ``create`` (429, 5xx, connection errors); each retry sleeps here first.
        # Counted on the call under way, so ``llm_calls.retries`` is right with or without the SDK's span.
        return patches + retry_patches(SyncAPIClient, AsyncAPIClient)

    def records_client_spans(self, resource: Any) -> bool:
        """Whether the SDK's own ``anthropic.messages.create`` span is recorded: the client was given a
        tracer provider, or a global one is set. Else the SDK, finding the chat span current, would
        make a non-recording span of its context only to write ``traceparent`` headers into the request
        (about a tenth of the instrumentor's CPU per call, measured), which nothing here reads; so the
        chat span is made current only when the SDK's span is recorded and must nest under it."""
        options = getattr(getattr(resource, "_client", None), "_open_telemetry", None)
        if not isinstance(options, Mapping):
            return True  # a client this module does not know: as before, the chat span is current
        traces = options.get("traces")
        if isinstance(traces, Mapping) and traces.get("enabled") is False:
            return False
        if options.get("tracer_provider") is not None:
            return True
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)

    def _wrap_stream(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def stream(resource: Any, *args: Any, **kwargs: Any) -> Any:
            # The SDK's manager is made on entry, from the request the guard let through.
            return _RecordingStreamManager(lambda request: original(resource, *args, **request), self, dict(kwargs),
                                           resource)

        return stream


def pair_results(use_ids: list[str], messages: list[Any]) -> list[tuple[str, str, bool]]:
    """``(id, observation, is_error)`` for each pending call, from the ``tool_result`` blocks in ``messages``.

    By ``tool_use_id`` first; a call with no id (or an id no result names) takes the result at its
    position within the turn when that result is not claimed by another call's id. Servers and proxies
    that send empty ids exist (looptrace's own scripted server did), and joining by id alone then
    loses every observation. The id is the call's own, else the result's.
    """
    found: list[tuple[str, str, bool]] = []
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "user":
            found += [(str(b.get("tool_use_id") or ""), conv.result_text(b.get("content")), bool(b.get("is_error")))
                      for b in conv.blocks(message.get("content")) if b.get("type") == "tool_result"]
    by_id = {r[0]: r for r in found if r[0]}
    claimed = {i for i in use_ids if i in by_id}
    out = []
    for position, use_id in enumerate(use_ids):
        if use_id in by_id:
            out.append(by_id[use_id])
        elif position < len(found) and found[position][0] not in claimed:
            out.append((use_id or found[position][0], found[position][1], found[position][2]))
        else:
            out.append((use_id, "", False))
    return out


class _MessageEvents(Accumulator):
    """A Messages stream's events folded into its final message, by the SDK's own accumulator."""

    def __init__(self, done: Done) -> None:
        from anthropic.lib.streaming._messages import accumulate_event

        super().__init__(done)
        self._accumulate = accumulate_event
        self._bufs: dict[int, bytes] = {}

    def add(self, event: Any) -> None:
        self.snapshot = self._accumulate(event=event, current_snapshot=self.snapshot, json_bufs=self._bufs)


class _RecordingStreamManager:
    """Wraps ``Messages.stream(...)``: records the stream's final snapshot when the block exits."""

    def __init__(self, make: Callable[[dict[str, Any]], Any], instrumentor: AnthropicInstrumentor,
                 request: dict[str, Any], resource: Any) -> None:
        self._make = make
        self._resource = resource
        self._manager: Any = None
        self._instrumentor = instrumentor
        self._request = request
        self._call: LlmCall | None = None
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._call = self._instrumentor._begin(self._request)
        try:
            self._manager = self._make(dict(self._call.request) if self._call else self._request)
            with self._instrumentor.calling(self._call, self._resource):
                self._stream = self._manager.__enter__()
        except BaseException as exc:
            self._instrumentor._end(self._call, error=exc)
            raise
        return self._stream

    def __exit__(self, et: Any, ev: BaseException | None, tb: Any) -> None:
        try:
            snapshot = self._stream.current_message_snapshot if ev is None else None
        except Exception as exc:  # noqa: BLE001 - stream ended before message_start
            snapshot, ev = None, ev or exc
        self._instrumentor._end(self._call, snapshot, ev)
        self._manager.__exit__(et, ev, tb)
