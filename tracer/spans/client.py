"""The recording core that every client instrumentor shares (Anthropic, OpenAI): only patching differs.

A client instrumentor wraps a model client's request methods with a ``chat {model}`` span that records
what replay needs and the SDKs' own spans lack: the whole request (stored as a delta against the
previous call) and the whole response. What differs between clients is how their requests and
responses are shaped, so each client is a ``Dialect`` (pure functions over plain data) plus the list of
methods to patch; everything else is here, once: grouping calls into runs, pairing tool calls with the
results the next request carries, streams, the guard.

Inside a looptrace run, calls attach to the current step. Outside one, calls are grouped into implicit
runs: a request that extends an open run's last request continues it; a response that asks for no tool
ends it. Each call of an implicit run is its step (callstep.py: one span, not a step span around a chat
span); the tool calls a response asks for are recorded when it arrives, and their results join them
when the next request carries them. Instrumenting never changes what the client returns or raises; a ``Guard`` may refuse a request
(``GuardTripped``, before it is sent) or add a reflection turn to it, as documented in docs/guards.md.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..guard import Guard, GuardTripped
from ..records.conventions import TOOL_NOT_FOUND
from ..records.digests import ConversationDigest
from ..records.requests import RequestLog
from .callstep import CallStep
from .conversation import extends
from .inflight import InCall
from .manual import LlmCall, Run, Step, ToolCall, current_run, current_step
from .streams import Accumulator, Done, RecordingAsyncStream, RecordingStream
from .tracing import Tracing

__all__ = ["Dialect", "ClientInstrumentor", "Accumulator", "RecordingStream", "RecordingAsyncStream", "Done"]

log = logging.getLogger("looptrace.instrumentor")

class Dialect(Protocol):
    """How one client's requests and responses read, as plain data."""

    provider: str  # gen_ai.provider.name

    def request(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The request as recorded and sent: the keyword arguments the agent passed."""

    def messages(self, request: dict[str, Any]) -> list[Any]:
        """The conversation a request carries (what the next request extends)."""

    def declared(self, request: dict[str, Any]) -> frozenset[str] | None:
        """The tool names the request declares; None when it declares none."""

    def plain(self, response: Any) -> dict[str, Any]:
        """The client's response object as JSON-able data."""

    def text(self, response: dict[str, Any]) -> str:
        """The response's text."""

    def tool_uses(self, response: dict[str, Any]) -> list[tuple[str, str, Any]]:
        """``(id, tool, arguments)`` of each tool call the response asks for, in order."""

    def results(self, use_ids: list[str], messages: Sequence[Any]) -> list[tuple[str, str, bool]]:
        """``(id, observation, is_error)`` for each pending call, from the messages a request added."""

    def first_user_text(self, messages: Sequence[Any]) -> str | None:
        """The task: the first user message's text."""

    def truncated(self, response: dict[str, Any]) -> bool:
        """The response was cut at its token limit."""


@dataclass
class _Implicit:
    run: Run
    hashes: list[str]
    # Hashes this run's requests incrementally: the run's own RequestLog once the run exists, so the
    # messages hashed here to find the run are not hashed again when the call is recorded.
    digest: ConversationDigest | RequestLog
    step: Step | None = None
    # The last response's tool calls, recorded as it arrived: (tool_use_id, call), in order. Each gets
    # its result from the next request; a run that goes no further keeps them unanswered.
    pending: list[tuple[str, ToolCall]] = field(default_factory=list)
    declared: frozenset[str] | None = None  # the tools the last request declared; None: it sent none
    task: str | None = None  # the first user message's text, for agents that rewrite their history


class ClientInstrumentor:
    """Patches ``_patches()`` on ``instrument()``; ``uninstrument()`` restores the client.

    ``guard``: a ``Guard`` enforced on every run the client's calls make or join (a run of the manual
    API that has its own guard keeps it); a tripped guard raises ``GuardTripped`` from the call."""

    dialect: Dialect
    default_agent = "client"

    def __init__(self, tracing: Tracing, *, agent: str | None = None, guard: Guard | None = None) -> None:
        self.tracing = tracing
        self.agent = agent or self.default_agent
        self.guard = guard
        self._originals: dict[tuple[type, str], Any] = {}
        self._open: list[_Implicit] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        # Before the provider shuts down (at exit too): calls a run made and never answered are stored.
        tracing.on_close(self._close_pending)

    # -- patching ---------------------------------------------------------------------------------

    def _patches(self) -> list[tuple[type, str, Callable[[Callable[..., Any]], Callable[..., Any]]]]:
        """``(class, method name, wrapper maker)`` for each method to wrap."""
        raise NotImplementedError

    def instrument(self) -> ClientInstrumentor:
        if self._originals:
            return self
        for cls, name, make in self._patches():
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
            provider = self.dialect.provider
            if step is not None:
                return step.llm_call(request, provider=provider)
            if run is not None:
                return LlmCall(run, request, provider=provider)
            implicit = self._implicit_for(request)
            implicit.step = CallStep(implicit.run)
            return implicit.step.llm_call(request, provider=provider)
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
        d = self.dialect
        messages = d.messages(request)
        with self._lock:
            found, hashes = self._extended(messages)
            task = d.first_user_text(messages)
            if found is None:
                found = self._rewritten(hashes, task)
            if found is None:
                run = self.tracing.run(self.agent, task=task, model=request.get("model"), guard=self.guard)
                # The run's RequestLog hashes a request's ``messages``; a conversation carried elsewhere
                # (the Responses API's ``input``) gets a digest of its own, or the log's would be misled.
                digest = run.requests if "messages" in request else ConversationDigest()
                found, seen = _Implicit(run, hashes, digest, task=task), 0
                self._open.append(found)
            else:
                seen = next((i for i, (a, b) in enumerate(zip(found.hashes, hashes)) if a != b),
                            min(len(found.hashes), len(hashes)))
                found.hashes = hashes
        # The pending calls' results are in the messages this request adds: reading only those keeps
        # the agent's thread from walking the whole conversation on every call.
        if found.pending:
            paired = d.results([use_id for use_id, _ in found.pending], messages[seen:])
            for (_, call), (_, text, is_error) in zip(found.pending, paired):
                # A tool the request did not declare is the model's invention, whatever the loop answered.
                unknown = found.declared is not None and call.tool not in found.declared
                error_type = TOOL_NOT_FOUND if unknown else "tool_error" if is_error else None
                call.result(text, is_error=is_error or unknown, error_type=error_type)
            found.pending = []
        found.declared = d.declared(request)
        return found

    def _extended(self, messages: list[Any]) -> tuple[_Implicit | None, list[str]]:
        """The open run whose last request ``messages`` extends, and the messages' hashes.

        Each open run's digest first compares its remembered messages (cheap, no hashing), so only
        the run that matches hashes anything, and only what is new. That comparison is the only one
        of the resent history a call makes: the run's RequestLog hands the hashes on to the call's
        ``encode`` (records/requests.py).
        """
        for o in self._open:
            if 0 < len(o.hashes) < len(messages):
                shas = o.digest.extension_shas(messages, len(o.hashes))
                if shas is not None:
                    return o, shas
        hashes = ConversationDigest().message_shas(messages)
        # Equal by hash but not by ``==`` (a tuple for a list, SDK objects): still the same conversation.
        return next((o for o in self._open if extends(o.hashes, hashes)), None), hashes

    def _rewritten(self, hashes: list[str], task: str | None) -> _Implicit | None:
        """The open run a request continues by rewriting its history instead of extending it.

        Some agents fold a tool's result into the task message rather than appending it (smolagents
        retells a failed step as "Error: ..." after the task): no request extends the last one. Such a
        request continues the open run that awaits tool results, opened with the same first message
        kind (the same system prompt, when there is one) and a task its task begins with.
        """
        if not task:
            return None
        for o in reversed(self._open):
            if (o.pending and o.task and task.startswith(o.task) and o.hashes and hashes
                    and (o.hashes[0] == hashes[0] or len(o.hashes) == 1)):
                return o
        return None

    def _end(self, call: LlmCall | None, message: Any = None, error: BaseException | None = None) -> None:
        if call is None:
            return
        try:
            # The provider's id of the request (the SDKs keep it on the response object, or on the
            # error): what its support asks for. On the chat span, so that it is kept without the SDK's
            # own span (which a client without a tracer provider does not make).
            request_id = getattr(message if error is None else error, "_request_id" if error is None else "request_id",
                                 None)
            if isinstance(request_id, str) and request_id:
                call.span.set_attribute(f"{self.dialect.provider}.request.id", request_id)
            # The SDK's response as plain data once, for both the span and the implicit run's step.
            if message is not None:
                message = self.dialect.plain(message)
            implicit = next((o for o in self._open if o.step is call.step and o.step is not None), None)
            text = self.dialect.text(message) if implicit is not None and message else ""
            if text and implicit is not None and implicit.step is not None:
                implicit.step.thought(text)  # the step is the call: on its span, before the span ends
            if error is not None:
                call.fail(error)
            else:
                call.response(message)
            if implicit is not None:
                self._after_response(implicit, message, text, error)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: could not end a chat span", exc_info=True)

    def _after_response(self, implicit: _Implicit, message: Any, text: str, error: BaseException | None) -> None:
        if implicit.step is None:
            return
        d = self.dialect
        msg = message or {}
        uses = d.tool_uses(msg) if msg else []
        step = implicit.step
        implicit.pending = [(use_id, step.tool_call(name, args, call_id=use_id or None, call_index=index))
                            for index, (use_id, name, args) in enumerate(uses)]
        step.end()
        if error is not None or not uses:
            cut = bool(msg) and d.truncated(msg)
            status = "error" if error is not None or cut else "ok"
            implicit.run.finish(status, answer=text or None,
                                error=f"{type(error).__name__}: {error}" if error else
                                ("stopped at max_tokens" if cut else None))
            with self._lock:
                self._open.remove(implicit)

    def _close_pending(self) -> None:
        """The tool calls of runs that went no further (the agent stopped, crashed or is exiting after
        them) stored unanswered, with no result: a result never came, and the call did happen."""
        if os.getpid() != self._pid:
            return  # a forked child: its parent's calls are its parent's to store
        with self._lock:
            pending = [call for o in self._open for _, call in o.pending]
            for o in self._open:
                o.pending = []
        for call in pending:
            try:
                call.unanswered()
            except Exception:  # noqa: BLE001
                log.debug("looptrace: could not store an unanswered tool call", exc_info=True)

    # -- the call under way -------------------------------------------------------------------------

    def calling(self, call: LlmCall | None, resource: Any) -> InCall:
        """The context a client method runs in: ``call`` known to the retry hook, and current for
        OpenTelemetry when the client's own spans are recorded (``records_client_spans``)."""
        return InCall(call, call is not None and self.records_client_spans(resource))

    def records_client_spans(self, resource: Any) -> bool:
        """Whether spans the client makes during a call are recorded anywhere, so the chat span must
        be their parent. A client's dialect that can tell otherwise says so; by default, yes."""
        return True

    # -- wrappers ---------------------------------------------------------------------------------

    def wrap(self, original: Callable[..., Any], stream: Callable[[Done], Accumulator] | None = None,
             streaming: Callable[[dict[str, Any]], bool] = lambda kw: bool(kw.get("stream"))) -> Callable[..., Any]:
        """A sync request method recorded; a streamed answer is passed through ``stream``'s accumulator."""
        def create(resource: Any, *args: Any, **kwargs: Any) -> Any:
            call = self._begin(self.dialect.request(kwargs))
            if call is not None:
                kwargs = dict(call.request)
            with self.calling(call, resource):
                try:
                    result = original(resource, *args, **kwargs)
                except BaseException as exc:
                    self._end(call, error=exc)
                    raise
            if stream is not None and streaming(kwargs):
                return RecordingStream(result, stream(lambda m, e: self._end(call, m, e)))
            self._end(call, result)
            return result

        return create

    def wrap_async(self, original: Callable[..., Any], stream: Callable[[Done], Accumulator] | None = None,
                   streaming: Callable[[dict[str, Any]], bool] = lambda kw: bool(kw.get("stream"))) -> Callable[..., Any]:
        async def create(resource: Any, *args: Any, **kwargs: Any) -> Any:
            call = self._begin(self.dialect.request(kwargs))
            if call is not None:
                kwargs = dict(call.request)
            with self.calling(call, resource):
                try:
                    result = await original(resource, *args, **kwargs)
                except BaseException as exc:
                    self._end(call, error=exc)
                    raise
            if stream is not None and streaming(kwargs):
                return RecordingAsyncStream(result, stream(lambda m, e: self._end(call, m, e)))
            self._end(call, result)
            return result

        return create
