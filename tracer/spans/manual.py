"""The manual tracing API: runs, steps, thoughts, tool calls and model calls as context managers.

Any Python agent can be traced in a few lines, and looptrace's own loop uses exactly this API, so
there is one way spans are made. Handles pass their span explicitly to children (no reliance on the
current context), so parallel tool calls in a thread pool nest under the right step. Nothing here
raises into the agent for telemetry reasons; the agent's own exceptions are recorded and re-raised.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from ..records import conventions as c
from ..records.pricing import price_of, stop_reason_of, usage_of
from ..records.requests import RequestLog
from ..records.text import clean_text, to_json

if TYPE_CHECKING:
    from ..guard import Guard
    from .guarding import GuardedRun

__all__ = ["Run", "Step", "ToolCall", "LlmCall", "current_run", "current_step", "RUN_STATUSES"]

RUN_STATUSES = (
    "ok", "max_iters", "budget_exceeded", "stagnated", "tool_error",
    "context_overflow", "error", "interrupted", "incomplete",
)

_current_run: ContextVar[Run | None] = ContextVar("looptrace_run", default=None)
_current_step: ContextVar[Step | None] = ContextVar("looptrace_step", default=None)


def current_run() -> Run | None:
    return _current_run.get()


def current_step() -> Step | None:
    return _current_step.get()


class _SpanScope:
    """A span that is made current for the duration of a ``with`` block."""

    span: Span
    _tokens: tuple[object, Token[Any]] | None = None
    _pid: int = 0

    def _foreign(self) -> bool:
        """True in a forked child for a span its parent started: the parent ends it, not the child."""
        return self._pid != 0 and self._pid != os.getpid()

    def _enter(self, var: ContextVar[Any]) -> None:
        self._tokens = (otel_context.attach(trace.set_span_in_context(self.span)), var.set(self))

    def _exit(self, var: ContextVar[Any]) -> None:
        if self._tokens:
            ctx_token, var_token = self._tokens
            try:
                otel_context.detach(ctx_token)  # type: ignore[arg-type]
                var.reset(var_token)
            except ValueError:
                pass  # exited in another context (e.g. a generator closed elsewhere): nothing to undo
            self._tokens = None


class Run(_SpanScope):
    """One agent run: an ``invoke_agent {agent}`` span. Use as a context manager."""

    def __init__(
        self,
        tracer: trace.Tracer,
        agent: str,
        *,
        task: str | None = None,
        model: str | None = None,
        parent: Run | None = None,
        run_id: str | None = None,
        source: str = "looptrace",
        strategy: str | None = None,
        links: Mapping[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
        capture_content: bool = True,
        redact: Callable[[Any], Any] | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.tracer = tracer
        self.agent = agent
        self.run_id = run_id or uuid.uuid4().hex
        self.model = model
        self.capture_content = capture_content
        # ``redact``: the sink's redactor, so request hashes are of the request as stored (replay).
        self.requests = RequestLog(redact)
        self.status: str | None = None
        self.answer: str | None = None
        self._steps = 0
        self._lock = threading.Lock()
        parent = parent if parent is not None else current_run()
        self.parent = parent
        attrs: dict[str, Any] = {
            c.GEN_AI_OPERATION: c.OP_INVOKE_AGENT,
            c.GEN_AI_AGENT_NAME: agent,
            c.RUN_ID: self.run_id,
            c.RUN_SOURCE: source,
            c.RUN_PID: os.getpid(),
        }
        optional = {
            c.RUN_TASK: clean_text(task) if task is not None and capture_content else None,
            c.GEN_AI_REQUEST_MODEL: model,
            c.RUN_PARENT_ID: parent.run_id if parent else None,
            c.RUN_STRATEGY: strategy,
            c.RUN_CONFIG: to_json(config) if config is not None else None,
        }
        for key, value in (links or {}).items():
            optional[f"looptrace.run.{key}"] = value
        attrs.update({k: v for k, v in optional.items() if v is not None})
        context = trace.set_span_in_context(parent.span) if parent else None
        self.span = tracer.start_span(f"{c.OP_INVOKE_AGENT} {agent}", context=context, kind=SpanKind.INTERNAL,
                                      attributes=attrs)
        self._pid = os.getpid()
        self.guard: GuardedRun | None = None
        if guard is not None:
            self.guarded_by(guard)

    def guarded_by(self, guard: Guard) -> GuardedRun:
        """Enforce ``guard`` on this run from its next model call on (spans/guarding.py)."""
        from .guarding import GuardedRun

        if self.guard is None:
            self.guard = GuardedRun(guard, self)
            self.span.set_attribute(c.RUN_GUARD, self.guard.describe())
        return self.guard

    def __enter__(self) -> Run:
        self._enter(_current_run)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if self.status is None:
            if ev is None:
                self.finish("ok")
            elif isinstance(ev, (KeyboardInterrupt, SystemExit)):
                self.finish("interrupted", error=f"{type(ev).__name__}")
            else:
                self.span.record_exception(ev)
                self.finish("error", error=f"{type(ev).__name__}: {ev}")
        self._exit(_current_run)

    @property
    def n_steps(self) -> int:
        return self._steps

    def step(self, thought: str | None = None) -> Step:
        return Step(self, self._next_index(), thought)

    def _next_index(self) -> int:
        with self._lock:
            self._steps += 1
            return self._steps

    def finish(self, status: str = "ok", *, answer: str | None = None, error: str | None = None) -> None:
        """End the run with ``status`` (one of ``RUN_STATUSES``). Later calls are ignored."""
        if self.status is not None or self._foreign():
            return
        self.status, self.answer = status, answer
        self.span.set_attribute(c.RUN_STATUS, status)
        if answer is not None and self.capture_content:
            self.span.set_attribute(c.RUN_ANSWER, clean_text(answer))
        if error is not None:
            self.span.set_attribute(c.RUN_ERROR, clean_text(error))
        if status in ("error", "interrupted"):
            self.span.set_status(Status(StatusCode.ERROR, clean_text(error or status)))
        self.span.end()


class Step(_SpanScope):
    """One iteration of the loop: a ``looptrace.step`` span under the run."""

    owns_span = True  # False for a step that is one model call: its span is the call's (callstep.py)

    def __init__(self, run: Run, index: int, thought: str | None = None) -> None:
        self.run = run
        self.index = index
        self._calls = 0
        self._lock = threading.Lock()
        # Unknown (None) until a model call of the step reports its usage: a step whose only call failed
        # (a 400 for a prompt too long) used 0 tokens as far as anyone knows, and its row says NULL, not 0.
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.cost_usd: float | None = None
        self._priced = True  # every call that reported usage had a price: else the step's cost is unknown
        self.span = run.tracer.start_span(
            c.STEP_SPAN,
            context=trace.set_span_in_context(run.span),
            attributes={c.RUN_ID: run.run_id, c.STEP_INDEX: index},
        )
        self._pid = os.getpid()
        if thought:
            self.thought(thought)

    def __enter__(self) -> Step:
        self._enter(_current_step)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if ev is not None:
            self.span.record_exception(ev)
            self.span.set_status(Status(StatusCode.ERROR, clean_text(f"{type(ev).__name__}: {ev}")))
        self.end()
        self._exit(_current_step)

    def end(self) -> None:
        if self._foreign() or not self.span.is_recording():  # a guard that stopped the run ended it
            return
        usage = {c.GEN_AI_USAGE_INPUT_TOKENS: self.input_tokens, c.GEN_AI_USAGE_OUTPUT_TOKENS: self.output_tokens,
                 c.STEP_COST: self.cost_usd if self._priced else None}
        self.span.set_attributes({k: v for k, v in usage.items() if v is not None})
        self.span.end()

    def thought(self, text: str) -> None:
        if self.run.capture_content:
            self.span.set_attribute(c.STEP_THOUGHT, clean_text(text))

    def record_event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """An event on the step's span, attributes as given (the guard's findings)."""
        self.span.add_event(name, attributes)

    def event(self, name: str, **attributes: Any) -> None:
        """Record that something happened in this step (a defence fired, a retry, a reflection)."""
        self.span.add_event(name, {k: v if isinstance(v, (int, float, bool)) else clean_text(v)
                                   for k, v in attributes.items() if v is not None})

    def tool_call(
        self, tool: str, args: Any, *, call_id: str | None = None, call_index: int | None = None,
        start_time: int | None = None,
    ) -> ToolCall:
        with self._lock:
            index = self._calls if call_index is None else call_index
            self._calls = max(self._calls, index + 1)
        return ToolCall(self, tool, args, call_id=call_id, call_index=index, start_time=start_time)

    def llm_call(self, request: Mapping[str, Any], *, provider: str = "anthropic") -> LlmCall:
        return LlmCall(self.run, request, step=self, provider=provider)

    def add_usage(self, input_tokens: int, output_tokens: int, cost: float | None, context_tokens: int) -> None:
        """A model call's usage; ``cost`` None when its model has no price (then the step's cost is unknown)."""
        self._count_usage(input_tokens, output_tokens, cost)
        self.span.set_attribute(c.STEP_CONTEXT_TOKENS, context_tokens)

    def _count_usage(self, input_tokens: int, output_tokens: int, cost: float | None) -> None:
        with self._lock:
            self.input_tokens = (self.input_tokens or 0) + input_tokens
            self.output_tokens = (self.output_tokens or 0) + output_tokens
            self.cost_usd = (self.cost_usd or 0.0) + (cost or 0.0)
            self._priced = self._priced and cost is not None


class ToolCall:
    """An ``execute_tool {tool}`` span. Set the observation with ``result`` or ``error``."""

    def __init__(
        self, step: Step, tool: str, args: Any, *, call_id: str | None, call_index: int, start_time: int | None = None
    ) -> None:
        self.step = step
        self.tool = tool
        self.args = args
        self.index = call_index
        self.done = False
        capture = step.run.capture_content
        attrs: dict[str, Any] = {
            c.GEN_AI_OPERATION: c.OP_EXECUTE_TOOL,
            c.GEN_AI_TOOL_NAME: clean_text(tool),
            c.RUN_ID: step.run.run_id,
            c.STEP_INDEX: step.index,
            c.TOOL_CALL_INDEX: call_index,
        }
        if capture:
            attrs[c.GEN_AI_TOOL_CALL_ARGUMENTS] = to_json(args)
        if call_id:
            attrs[c.GEN_AI_TOOL_CALL_ID] = call_id
        # A step that is one model call has no span of its own: its tool calls sit under the run, as the
        # GenAI conventions place execute_tool spans.
        parent = step.span if step.owns_span else step.run.span
        self.span = step.run.tracer.start_span(
            f"{c.OP_EXECUTE_TOOL} {clean_text(tool)}", context=trace.set_span_in_context(parent),
            attributes=attrs, start_time=start_time,
        )

    def __enter__(self) -> ToolCall:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if not self.done:
            if ev is not None:
                self.span.record_exception(ev)
                self.error(type(ev).__name__, f"{type(ev).__name__}: {ev}")
            else:
                self.result("")

    def result(self, observation: Any, *, is_error: bool = False, error_type: str | None = None) -> None:
        if self.done:
            return
        self.done = True
        text = clean_text(observation) if isinstance(observation, (str, bytes, bytearray)) else to_json(observation)
        if self.step.run.capture_content:
            self.span.set_attribute(c.GEN_AI_TOOL_CALL_RESULT, clean_text(text))
        else:
            self.span.set_attribute(c.TOOL_RESULT_BYTES, len(clean_text(text).encode("utf-8")))
        if is_error or error_type:
            self.span.set_attribute(c.TOOL_IS_ERROR, True)
            if error_type:
                self.span.set_attribute(c.ERROR_TYPE, error_type)
            self.span.set_status(Status(StatusCode.ERROR, error_type or "tool error"))
        self.span.end()
        if self.step.run.guard is not None:
            self.step.run.guard.tool_result(self.step.index, self.index, self.tool, self.args, text,
                                            bool(is_error or error_type))

    def unanswered(self) -> None:
        """End the call with no result: the run stopped (or its process exits) before one arrived."""
        if not self.done:
            self.done = True
            self.span.end()

    def error(self, error_type: str, message: str) -> None:
        """The call failed: ``error_type`` is e.g. ``tool_not_found``, ``invalid_arguments`` or an exception name."""
        self.result(message, is_error=True, error_type=error_type)


class LlmCall:
    """A ``chat {model}`` span recording the request (as a delta against the run's previous call),
    the response, usage and cost, so the run can be replayed."""

    def __init__(self, run: Run | None, request: Mapping[str, Any], *, step: Step | None = None,
                 provider: str = "anthropic", tracer: trace.Tracer | None = None) -> None:
        if run is not None and run.guard is not None:  # before the span: a refused request made no call
            request = run.guard.before_call(step, request, provider)
        self.request = request  # what to send: a guard's reflection turn included
        self.run, self.step = run, step
        self.model = str(request.get("model") or "")
        self.done = False
        self.retries = 0
        # A step that is this call (callstep.py) takes this span as its own, under the run.
        merged = step is not None and not step.owns_span
        parent = step.span if step and not merged else (run.span if run else None)
        tracer = tracer or (run.tracer if run else trace.get_tracer("looptrace"))
        attrs: dict[str, Any] = {
            c.GEN_AI_OPERATION: c.OP_CHAT,
            c.GEN_AI_PROVIDER: provider,
            c.GEN_AI_REQUEST_MODEL: self.model,
        }
        if run is not None:
            attrs[c.RUN_ID] = run.run_id
        if step is not None:
            attrs[c.STEP_INDEX] = step.index
            if merged:
                attrs[c.STEP_OF_CALL] = True
        if request.get("max_tokens") is not None:
            attrs[c.GEN_AI_REQUEST_MAX_TOKENS] = int(request["max_tokens"])
        if isinstance(request.get("temperature"), (int, float)):
            attrs[c.GEN_AI_REQUEST_TEMPERATURE] = float(request["temperature"])
        self.span = tracer.start_span(
            f"{c.OP_CHAT} {self.model}", kind=SpanKind.CLIENT,
            context=trace.set_span_in_context(parent) if parent else None, attributes=attrs,
        )
        if merged:
            step.adopt(self.span)  # type: ignore[union-attr]
        self._record_request(request)

    def _record_request(self, request: Mapping[str, Any]) -> None:
        if self.run is None or not self.run.capture_content:
            return
        call_id = f"{self.span.get_span_context().span_id:016x}"
        enc = self.run.requests.encode(request, call_id)
        attrs: dict[str, Any] = {
            c.LLM_PARAMS: to_json(enc.params),
            c.LLM_MESSAGES_KEEP: enc.keep,
            c.LLM_MESSAGES_APPEND: to_json(enc.append),
            c.LLM_REQUEST_SHA: enc.request_sha,
        }
        attrs.update((k, v) for k, v in ((c.LLM_BASE_CALL, enc.base_call_id), (c.LLM_MESSAGES_DROP, enc.drop))
                     if v)
        for sha_key, sha, key, content in (
            (c.LLM_SYSTEM_SHA, enc.system_sha, c.LLM_SYSTEM, enc.system),
            (c.LLM_TOOLS_SHA, enc.tools_sha, c.LLM_TOOLS, enc.tools),
        ):
            if sha:
                attrs[sha_key] = sha
            if content is not None:
                attrs[key] = to_json(content)
        self.span.set_attributes(attrs)

    def __enter__(self) -> LlmCall:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        if not self.done:
            self.fail(ev if ev is not None else RuntimeError("no response recorded"))

    def retry(self, attempt: int, error: BaseException | str, wait_seconds: float | None = None) -> None:
        """A transient failure that will be retried: an event on the span, counted in ``retries``."""
        self.retries = attempt
        self.span.add_event("retry", {"attempt": attempt, "error": clean_text(str(error)),
                                      **({"wait_seconds": wait_seconds} if wait_seconds is not None else {})})

    def response(self, message: Any) -> None:
        """Record the Messages API response (a dict or SDK ``Message``) with its usage and cost."""
        if self.done:
            return
        self.done = True
        msg = message.model_dump(mode="json") if hasattr(message, "model_dump") else dict(message)
        usage = usage_of(msg)
        total_in, output = usage.total_input, usage.output_tokens
        # A model with no price has an unknown cost, stored NULL, never $0 (records/pricing.py).
        cost = usage.cost(self.model) if price_of(self.model) is not None else None
        attrs: dict[str, Any] = {
            c.GEN_AI_USAGE_INPUT_TOKENS: total_in,
            c.GEN_AI_USAGE_OUTPUT_TOKENS: output,
            c.GEN_AI_USAGE_CACHE_READ: usage.cache_read_tokens,
            c.GEN_AI_USAGE_CACHE_CREATION: usage.cache_creation_tokens,
            c.LLM_RETRIES: self.retries,
        }
        if cost is not None:
            attrs[c.LLM_COST] = cost
        if msg.get("id"):
            attrs[c.GEN_AI_RESPONSE_ID] = str(msg["id"])
        if msg.get("model"):
            attrs[c.GEN_AI_RESPONSE_MODEL] = str(msg["model"])
        if reason := stop_reason_of(msg):
            attrs[c.GEN_AI_RESPONSE_FINISH_REASONS] = [reason]
        if self.run is None or self.run.capture_content:
            attrs[c.LLM_RESPONSE] = to_json(msg)
        self.span.set_attributes(attrs)
        if self.step is not None:
            self.step.add_usage(total_in, output, cost, total_in)
        if self.run is not None and self.run.guard is not None:  # before the end: its events go on the step
            self.run.guard.response(self.step, self.model, total_in, output, cost or 0.0)
        self.span.end()

    def fail(self, error: BaseException | str) -> None:
        if self.done:
            return
        self.done = True
        text = clean_text(f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error)
        self.span.set_attributes({c.LLM_ERROR: text, c.LLM_RETRIES: self.retries,
                                  c.ERROR_TYPE: type(error).__name__ if isinstance(error, BaseException) else "error"})
        self.span.set_status(Status(StatusCode.ERROR, text))
        self.span.end()
