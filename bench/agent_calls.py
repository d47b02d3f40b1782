"""One child process of the instrumentor benchmark: a tool loop of ``messages.create`` calls under one
instrumentation, printing its CPU cost and flush time as JSON.

``python -m bench.agent_calls VARIANT BASE_URL DB CALLS`` (``python -m bench.agent_calls serve`` runs the
scripted Messages API for them in a process of its own); VARIANT is ``none``, ``looptrace``,
``openinference`` or ``openllmetry`` (the two peers with the SDK's BatchSpanProcessor and an in-memory
exporter, as their docs set them up), ``looptrace+guard`` (the instrumentor with a ``Guard`` on
``max_calls``, ``max_usd`` and ``max_repeats``, none of which trips: every call pays for every check),
``looptrace+guard+context`` (``max_context_tokens`` too), or ``looptrace+otlp``, which also keeps the spans to size them
as OTLP protobuf (not timed). Each variant runs in its own process because every instrumentor
patches the SDK's classes globally.

The anthropic SDK (2.16) makes a span of its own for every call (``anthropic.messages.create``) when
its client has a tracer provider, given or global. In the variants above none has: the peers'
provider is their own, not global, and looptrace's client is given none. ``openinference+global``
and ``openllmetry+global`` set their provider global, as their docs set them up
(``phoenix.otel.register``, ``Traceloop.init``), so the SDK's span is made and exported too;
``looptrace+sdk`` gives the client looptrace's provider (``open_telemetry=``), so looptrace stores it.

The loop is an agent's: conversations start at 11 messages and grow by a tool_use and its
tool_result per call to 59, then a new conversation starts (so 200 calls make 8 conversations).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import anthropic

__all__ = ["FIRST", "LAST", "conversation_calls"]

FIRST, LAST = 11, 59  # messages in a conversation's first and last request
WARMUP = 10


def _opening(conversation: int) -> list[dict[str, Any]]:
    """A conversation's first 11 messages: a task, then five earlier tool turns."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {conversation}: fix the failing test."}]
    for i in range(5):
        messages += _turn(conversation, i, "x" * 400)
    return messages


def _turn(conversation: int, i: int, body: str) -> list[dict[str, Any]]:
    use_id = f"toolu_{conversation:04d}_{i:03d}"
    return [
        {"role": "assistant", "content": [
            {"type": "text", "text": f"Let me read file {i}."},
            {"type": "tool_use", "id": use_id, "name": "read_file", "input": {"path": f"src/mod{i}.py"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use_id, "content": body}]},
    ]


TOOLS = [{"name": "read_file", "description": "Read a file of the repository.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}]
SYSTEM = "You are a careful software engineer. Use the tools to inspect the repository. " * 8


def conversation_calls(client: anthropic.Anthropic, calls: int, start: int = 0) -> None:
    """``calls`` model calls of the tool loop; each response's tool_use is answered in the next request."""
    done, conversation = 0, start
    while done < calls:
        messages = _opening(conversation)
        i = 5
        while len(messages) <= LAST and done < calls:
            reply = client.messages.create(model="claude-sonnet-4-5", max_tokens=1024, system=SYSTEM, tools=TOOLS,
                                           messages=messages)
            done += 1
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                break
            body = f"contents of {uses[0].input}\n" + "y" * 600
            messages = messages + [
                {"role": "assistant", "content": [b.model_dump(mode="json", exclude_none=True) for b in reply.content]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": uses[0].id, "content": body}]},
            ]
            i += 1
        conversation += 1


def _setup(variant: str, db: Path) -> tuple[Any, Any]:
    """(flush function, object to keep), after instrumenting the SDK as ``variant`` says."""
    if variant == "none":
        return (lambda: None), None
    if variant.startswith("looptrace"):
        from looptrace.tracer.spans.anthropic import AnthropicInstrumentor
        from looptrace.tracer.spans.tracing import Tracing

        tracing = Tracing(db, handle_sigterm=False)
        if variant == "looptrace+otlp":
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

            memory = InMemorySpanExporter()
            tracing.provider.add_span_processor(SimpleSpanProcessor(memory))
            tracing.memory = memory  # type: ignore[attr-defined]
        guard = None
        if variant.startswith("looptrace+guard"):
            from looptrace.tracer.guard import Guard

            guard = Guard(max_calls=10**9, max_usd=10.0**9, max_repeats=3,
                          max_context_tokens=10**9 if variant.endswith("+context") else None)
        AnthropicInstrumentor(tracing, guard=guard).instrument()
        return tracing.flush, tracing
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if variant.endswith("+global"):
        from opentelemetry import trace

        trace.set_tracer_provider(provider)
        variant = variant.removesuffix("+global")
    if variant == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor as OpenInference

        OpenInference().instrument(tracer_provider=provider)
    elif variant == "openllmetry":
        os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")  # keep full content, as the others do
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(tracer_provider=provider)
    else:
        raise SystemExit(f"unknown variant {variant!r}")
    return provider.force_flush, (provider, exporter)


def _store_bytes(db: Path) -> int:
    files = [db, Path(f"{db}.wal")] + [p for p in Path(f"{db}.segments").rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files if p.exists())


def main(variant: str, base_url: str, db: str, calls: int) -> dict[str, Any]:
    flush, kept = _setup(variant, Path(db))
    # looptrace+sdk: the client traces into looptrace's provider, so the SDK's own span is stored too.
    traced = {"open_telemetry": {"tracer_provider": kept.provider}} if variant == "looptrace+sdk" else {}
    client = anthropic.Anthropic(api_key="bench", base_url=base_url, max_retries=0, **traced)
    conversation_calls(client, WARMUP, start=10_000)  # imports, connection pool, lazy paths
    flush()
    cpu0, wall0, own0 = time.process_time(), time.perf_counter(), time.thread_time()
    conversation_calls(client, calls)
    cpu1, wall1, own1 = time.process_time(), time.perf_counter(), time.thread_time()
    flush()
    cpu2, wall2 = time.process_time(), time.perf_counter()
    out: dict[str, Any] = {"variant": variant, "calls": calls, "loop_cpu": cpu1 - cpu0, "flush_cpu": cpu2 - cpu1,
                           "loop_wall": wall1 - wall0, "flush_wall": wall2 - wall1,
                           "loop_thread_cpu": own1 - own0}  # the agent's own thread: what it waits for
    if variant.startswith("looptrace"):
        from looptrace.tracer.store import Store

        t0 = time.perf_counter()
        kept.shutdown()  # absorbs the segments: the durable, queryable form
        out["shutdown_wall"] = time.perf_counter() - t0
        with Store(db).reader(locked_down=False) as conn:
            out["llm_calls_stored"] = conn.execute("SELECT count(*) FROM llm_calls").fetchone()[0]
            out["steps_stored"] = conn.execute("SELECT count(DISTINCT (run_id, step)) FROM steps").fetchone()[0]
        out["store_bytes"] = _store_bytes(Path(db))
        if variant == "looptrace+otlp":
            from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

            out["otlp_bytes"] = len(encode_spans(kept.memory.get_finished_spans()).SerializeToString())
    return out


def _reply(body: dict[str, Any]) -> Any:
    from looptrace.loop.replies import Reply

    n = len(body.get("messages") or [])
    if n >= LAST:
        return Reply(content=[{"type": "text", "text": "The test passes now."}])
    return Reply(stop_reason="tool_use", content=[
        {"type": "text", "text": "I will read the next file."},
        {"type": "tool_use", "id": f"toolu_{n:03d}_{time.monotonic_ns()}", "name": "read_file",
         "input": {"path": f"src/mod{n}.py"}}])


def serve() -> None:
    """The scripted Messages API in this process until stdin closes; prints its base URL first."""
    from looptrace.loop.server import MessagesServer

    with MessagesServer(_reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
        sys.exit(0)
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))))
    sys.stdout.flush()
    os._exit(0)  # do not let the SDK's exit handlers run after the measurement
