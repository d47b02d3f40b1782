"""Instrumenting the ``anthropic`` client: agents looptrace did not write, traced by their model calls.

``AnthropicInstrumentor`` wraps ``Messages.create`` (sync and async, streamed or not) and
``Messages.stream`` with a ``chat {model}`` span that records what replay needs and the SDK's own
span lacks: the whole request (system prompt, tools, parameters, stored as a delta against the
previous call) and the whole response. The SDK's own ``anthropic.messages.create`` span (emitted when
the client's tracer provider is ours, e.g. ``Tracing(set_global=True)``) nests under it and keeps
the HTTP details (status, resend count, request id); the ``llm_calls`` view reads retries from it.

Inside a looptrace run, calls attach to the current step. Outside one, calls are grouped into
implicit runs: a request that extends an open run's last request continues it; a response that asks
for no tool ends it. Instrumenting never changes what the client returns or raises.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace

from . import conversation as conv
from ..guard import Guard, GuardTripped
from .manual import LlmCall, Run, Step, current_run, current_step
from ..records.conventions import TOOL_NOT_FOUND
from ..records.digests import ConversationDigest
from ..records.requests import RequestLog
from .tracing import Tracing

__all__ = ["AnthropicInstrumentor"]

log = logging.getLogger("looptrace.anthropic")


@dataclass
class _Implicit:
    run: Run
    hashes: list[str]
    # Hashes this run's requests incrementally: the run's own RequestLog once the run exists, so the
    # messages hashed here to find the run are not hashed again when the call is recorded.
    digest: ConversationDigest | RequestLog
    step: Step | None = None
    pending: list[tuple[str, str, Any]] = field(default_factory=list)  # (tool_use_id, name, input), in order
    pending_since: int = 0
    declared: frozenset[str] | None = None  # the tools the last request declared; None: it sent none


def _declared(request: dict[str, Any]) -> frozenset[str] | None:
    tools = request.get("tools")
    if not isinstance(tools, (list, tuple)):
        return None
    return frozenset(str(t.get("name")) for t in tools if isinstance(t, dict) and t.get("name"))


class AnthropicInstrumentor:
    """``AnthropicInstrumentor(tracing).instrument()``; ``uninstrument()`` restores the client.

    ``guard``: a ``Guard`` enforced on every run the client's calls make or join (a run of the manual
    API that has its own guard keeps it); a tripped guard raises ``GuardTripped`` from the call."""

    def __init__(self, tracing: Tracing, *, agent: str = "anthropic-client", guard: Guard | None = None) -> None:
        self.tracing = tracing
        self.agent = agent
        self.guard = guard
        self._originals: dict[tuple[type, str], Any] = {}
        self._open: list[_Implicit] = []
        self._lock = threading.Lock()

    # -- patching ---------------------------------------------------------------------------------

    def instrument(self) -> AnthropicInstrumentor:
        from anthropic.resources.messages import AsyncMessages, Messages

        if self._originals:
            return self
        for cls, name, make in (
            (Messages, "create", self._wrap_create),
            (AsyncMessages, "create", self._wrap_acreate),
            (Messages, "stream", self._wrap_stream),
        ):
            original = cls.__dict__[name]
            self._originals[(cls, name)] = original
            setattr(cls, name, functools.wraps(original)(make(original)))
        return self

    def uninstrument(self) -> None:
        for (cls, name), original in self._originals.items():
            setattr(cls, name, original)
        self._originals.clear()

    # -- recording --------------------------------------------------------------------------------

    def _begin(self, request: dict[str, Any]) -> LlmCall | None:
        """The chat span of a call about to be made; its ``request`` is what to send (a guard may add a
        reflection turn). Raises only ``GuardTripped``, before anything is sent."""
        implicit = None
        try:
            step, run = current_step(), current_run()
            if run is not None and self.guard is not None and run.guard is None:
                run.guarded_by(self.guard)
            if step is not None:
                return step.llm_call(request)
            if run is not None:
                return LlmCall(run, request)
            implicit = self._implicit_for(request)
            implicit.step = implicit.run.step()
            return implicit.step.llm_call(request)
        except GuardTripped:
            if implicit is not None:  # the guard stored the run as it ended; the next call starts afresh
                with self._lock:
                    if implicit in self._open:
                        self._open.remove(implicit)
            raise
        except Exception:  # noqa: BLE001 - telemetry never breaks the agent
            log.debug("looptrace: could not start a chat span", exc_info=True)
            return None

    def _implicit_for(self, request: dict[str, Any]) -> _Implicit:
        messages = list(request.get("messages") or [])
        with self._lock:
            found, hashes = self._extended(messages)
            if found is None:
                run = self.tracing.run(self.agent, task=conv.first_user_text(messages), model=request.get("model"),
                                       guard=self.guard)
                found, seen = _Implicit(run, hashes, run.requests), 0
                self._open.append(found)
            else:
                found.hashes, seen = hashes, len(found.hashes)
        # The pending calls' results are in the messages this request adds: reading only those keeps
        # the agent's thread from walking the whole conversation on every call.
        if found.step is not None and found.pending:
            paired = pair_results([use_id for use_id, _, _ in found.pending], messages[seen:])
            for index, ((name, args), (use_id, text, is_error)) in enumerate(
                zip(((n, a) for _, n, a in found.pending), paired)
            ):
                call = found.step.tool_call(name, args, call_id=use_id or None, call_index=index,
                                            start_time=found.pending_since)
                # A tool the request did not declare is the model's invention, whatever the loop answered.
                unknown = found.declared is not None and name not in found.declared
                error_type = TOOL_NOT_FOUND if unknown else "tool_error" if is_error else None
                call.result(text, is_error=is_error or unknown, error_type=error_type)
            found.pending = []
        found.declared = _declared(request)
        return found

    def _extended(self, messages: list[Any]) -> tuple[_Implicit | None, list[str]]:
        """The open run whose last request ``messages`` extends, and the messages' hashes.

        Each open run's digest first compares its remembered messages (cheap, no hashing), so only
        the run that matches hashes anything, and only what is new.
        """
        for o in self._open:
            if 0 < len(o.hashes) < len(messages) and o.digest.prefix_len(messages) == len(o.hashes):
                return o, o.digest.message_shas(messages)
        hashes = ConversationDigest().message_shas(messages)
        # Equal by hash but not by ``==`` (a tuple for a list, SDK objects): still the same conversation.
        return next((o for o in self._open if conv.extends(o.hashes, hashes)), None), hashes

    def _end(self, call: LlmCall | None, message: Any = None, error: BaseException | None = None) -> None:
        if call is None:
            return
        try:
            # The SDK's Message as plain data once, for both the span and the implicit run's step.
            if hasattr(message, "model_dump"):
                message = message.model_dump(mode="json")
            if error is not None:
                call.fail(error)
            else:
                call.response(message)
            self._after_response(call, message, error)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: could not end a chat span", exc_info=True)

    def _after_response(self, call: LlmCall, message: Any, error: BaseException | None) -> None:
        implicit = next((o for o in self._open if o.step is call.step and o.step is not None), None)
        if implicit is None or implicit.step is None:
            return
        msg = message.model_dump(mode="json") if hasattr(message, "model_dump") else (message or {})
        text = conv.response_text(msg) if msg else ""
        if text:
            implicit.step.thought(text)
        uses = conv.tool_uses(msg) if msg else []
        implicit.pending = [(str(u.get("id") or ""), str(u.get("name")), u.get("input")) for u in uses]
        implicit.pending_since = time.time_ns()
        implicit.step.end()
        if error is not None or not uses:
            status = "error" if error is not None else ("ok" if msg.get("stop_reason") != "max_tokens" else "error")
            implicit.run.finish(status, answer=text or None,
                                error=f"{type(error).__name__}: {error}" if error else
                                ("stopped at max_tokens" if status == "error" else None))
            with self._lock:
                self._open.remove(implicit)

    # -- wrappers ---------------------------------------------------------------------------------

    def _wrap_create(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def create(resource: Any, *args: Any, **kwargs: Any) -> Any:
            call = self._begin(dict(kwargs))
            if call is not None:
                kwargs = dict(call.request)
            with trace.use_span(call.span, end_on_exit=False) if call else _nullcontext():
                try:
                    result = original(resource, *args, **kwargs)
                except BaseException as exc:
                    self._end(call, error=exc)
                    raise
            if kwargs.get("stream"):
                return _RecordingStream(result, lambda m, e: self._end(call, m, e))
            self._end(call, result)
            return result

        return create

    def _wrap_acreate(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def create(resource: Any, *args: Any, **kwargs: Any) -> Any:
            call = self._begin(dict(kwargs))
            if call is not None:
                kwargs = dict(call.request)
            with trace.use_span(call.span, end_on_exit=False) if call else _nullcontext():
                try:
                    result = await original(resource, *args, **kwargs)
                except BaseException as exc:
                    self._end(call, error=exc)
                    raise
            if kwargs.get("stream"):
                return _RecordingAsyncStream(result, lambda m, e: self._end(call, m, e))
            self._end(call, result)
            return result

        return create

    def _wrap_stream(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def stream(resource: Any, *args: Any, **kwargs: Any) -> Any:
            # The SDK's manager is made on entry, from the request the guard let through.
            return _RecordingStreamManager(lambda request: original(resource, *args, **request), self, dict(kwargs))

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


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


class _Accumulator:
    def __init__(self, done: Callable[[Any, BaseException | None], None]) -> None:
        from anthropic.lib.streaming._messages import accumulate_event

        self._accumulate = accumulate_event
        self._done = done
        self._snapshot: Any = None
        self._bufs: dict[int, bytes] = {}
        self._finished = False

    def feed(self, event: Any) -> None:
        try:
            self._snapshot = self._accumulate(event=event, current_snapshot=self._snapshot, json_bufs=self._bufs)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: could not accumulate a stream event", exc_info=True)

    def finish(self, error: BaseException | None = None) -> None:
        if not self._finished:
            self._finished = True
            if error is None and self._snapshot is None:
                error = RuntimeError("stream closed before any event")
            self._done(self._snapshot if error is None else None, error)


class _RecordingStream:
    """Passes a ``Stream`` through unchanged while accumulating the final message."""

    def __init__(self, stream: Any, done: Callable[[Any, BaseException | None], None]) -> None:
        self._stream = stream
        self._acc = _Accumulator(done)

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._stream:
                self._acc.feed(event)
                yield event
        except BaseException as exc:
            self._acc.finish(exc)
            raise
        self._acc.finish()

    def __enter__(self) -> _RecordingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stream.close()
        self._acc.finish(None if self._acc._snapshot is not None else RuntimeError("stream closed early"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _RecordingAsyncStream:
    def __init__(self, stream: Any, done: Callable[[Any, BaseException | None], None]) -> None:
        self._stream = stream
        self._acc = _Accumulator(done)

    async def __aiter__(self) -> AsyncIterator[Any]:
        try:
            async for event in self._stream:
                self._acc.feed(event)
                yield event
        except BaseException as exc:
            self._acc.finish(exc)
            raise
        self._acc.finish()

    async def __aenter__(self) -> _RecordingAsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._stream.close()
        self._acc.finish(None if self._acc._snapshot is not None else RuntimeError("stream closed early"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _RecordingStreamManager:
    """Wraps ``Messages.stream(...)``: records the stream's final snapshot when the block exits."""

    def __init__(self, make: Callable[[dict[str, Any]], Any], instrumentor: AnthropicInstrumentor,
                 request: dict[str, Any]) -> None:
        self._make = make
        self._manager: Any = None
        self._instrumentor = instrumentor
        self._request = request
        self._call: LlmCall | None = None
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._call = self._instrumentor._begin(self._request)
        try:
            self._manager = self._make(dict(self._call.request) if self._call else self._request)
            with trace.use_span(self._call.span, end_on_exit=False) if self._call else _nullcontext():
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
