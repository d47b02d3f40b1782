"""The exporter's batch path (issue 38): spans to rows a batch at a time, the redaction screen over
whole columns, outcome keys over a column. Each gives what the per-value path gave.

The spans come from the real writers: the loop (scripted model over loopback HTTP, traced by a real
``Tracing``), the manual API fed with real trajectories of the shared corpus, and a few spans built
by hand for the edges no writer makes (no context, an all-zero parent id, no attributes).
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel
from looptrace.loop.scripted import SCRIPTED_MODEL, Script, act, finish
from looptrace.loop.server import MessagesServer
from looptrace.loop.tools import Tool
from looptrace.tracer import DuckDBSpanExporter, Tracing
from looptrace.tracer.records.actions import (near_observation_key, near_observation_keys, progress_key,
                                              progress_keys)
from looptrace.tracer.records.spans import PlainSpan, SpanBatch, columns_for_batch
from looptrace.tracer.sink import Redactor
from looptrace.tracer.sink import rows as sink_rows
from looptrace.tracer.sink.rows import redact_tables
from looptrace.tracer.spans.manual import Run

from .conftest import query
from .secret_corpus import corpus, env_for

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora"


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).replace(tzinfo=None).isoformat(sep=" ")


def _reference(span: ReadableSpan) -> PlainSpan:
    """The per-value conversion that ``SpanBatch.of_readable`` replaced, span by span, through the
    SDK's public properties only."""
    ctx, parent, scope = span.context, span.parent, span.instrumentation_scope
    events = [{"name": e.name, "time": _iso(e.timestamp), "attributes": dict(e.attributes or {})}
              for e in span.events]
    return PlainSpan(
        trace_id="%032x" % ctx.trace_id if ctx else "",
        span_id="%016x" % ctx.span_id if ctx else "",
        parent_span_id="%016x" % parent.span_id if parent else None,
        name=span.name,
        kind=span.kind.name,
        start_ns=span.start_time,
        end_ns=span.end_time,
        status_code=span.status.status_code.name,
        status_message=span.status.description,
        attributes=dict(span.attributes or {}),
        events=events or (),
        resource=span.resource.attributes if span.resource else {},
        scope=scope.name if scope else None,
    )


def _assert_same_rows(spans: Sequence[ReadableSpan]) -> None:
    fast, slow = SpanBatch.of_readable(spans), SpanBatch.of_plain([_reference(s) for s in spans])
    for field in PlainSpan.__dataclass_fields__:
        assert getattr(fast, field) == getattr(slow, field), field
    assert columns_for_batch(fast) == columns_for_batch(slow)


def _memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return provider, memory


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def test_the_loops_spans_map_to_the_rows_the_per_value_conversion_made(db: Path) -> None:
    echo = Tool("echo", "Echo.", _schema(text={"type": "string"}), lambda text: f"echo: {text} ✓")
    boom = Tool("boom", "Fails.", _schema(), lambda: 1 / 0)
    script = [act("echo", {"text": "first"}, thought="Let me look."), act("boom", {}),
              act("echo", {"text": "é"}), finish("done")]
    memory = InMemorySpanExporter()
    with MessagesServer(Script({"task": script})) as server:
        tracing = Tracing(db)
        tracing.provider.add_span_processor(SimpleSpanProcessor(memory))  # what the store's exporter gets
        try:
            model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="x")
            Agent(model, [echo, boom], tracing).run("task")
        finally:
            tracing.shutdown(compact=False)
    spans = memory.get_finished_spans()
    ops = {s.attributes.get("gen_ai.operation.name") for s in spans}
    assert {"invoke_agent", "chat", "execute_tool"} <= ops  # every typed table is exercised
    _assert_same_rows(spans)


def _trajectories(limit: int) -> list[list[dict[str, Any]]]:
    files = sorted(CORPUS.glob("sweagent_java_msb/*/*.traj"))[:limit]
    return [json.loads(f.read_text())["trajectory"] for f in files]


def test_corpus_trajectories_through_the_manual_api_map_to_the_same_rows() -> None:
    if not CORPUS.is_dir():
        pytest.skip("the shared corpus is not here")
    provider, memory = _memory_provider()
    tracer = provider.get_tracer("corpus")
    for trajectory in _trajectories(3):
        with Run(tracer, "corpus-agent", task="a real task") as run:
            for entry in trajectory:
                with run.step(entry.get("thought")) as step, \
                        step.tool_call("bash", {"command": entry.get("action")}) as call:
                    call.result(entry.get("observation"))
    spans = memory.get_finished_spans()
    assert len(spans) > 50
    _assert_same_rows(spans)


def test_edge_spans_no_writer_makes_map_to_the_same_rows() -> None:
    provider, memory = _memory_provider()
    with provider.get_tracer("t").start_as_current_span("real") as real:
        real.set_status(Status(StatusCode.ERROR, "it broke"))
        real.add_event("e", {"k": "v"})
    [made] = memory.get_finished_spans()
    zero_parent = SpanContext(made.context.trace_id, 0, is_remote=True)
    spans = [
        made,
        ReadableSpan("no context"),  # no context, no attributes, no scope
        ReadableSpan("zero parent", context=made.context, parent=zero_parent, kind=SpanKind.CLIENT,
                     attributes={"a": 1}, events=[Event("x", {"n": 2}, timestamp=1_700_000_000_123_456_789)]),
    ]
    _assert_same_rows(spans)


def _batch_with_secrets(planted: Sequence[str], clean: int) -> dict[str, Any]:
    provider, memory = _memory_provider()
    with Run(provider.get_tracer("t"), "agent", task="fix the build") as run:
        for i, text in enumerate(planted):
            with run.step(f"step {i}: {text}" if i % 3 == 0 else "thinking") as step, \
                    step.tool_call("bash", {"command": text} if i % 3 == 1 else {"n": i}) as call:
                call.result(text if i % 3 == 2 else f"ok {i}")
        for i in range(clean):
            with run.step("a plain step") as step, step.tool_call("ls", {"path": "."}) as call:
                call.result("a b c")
    return columns_for_batch(SpanBatch.of_readable(memory.get_finished_spans()))


def _without_times(tables: dict[str, Any]) -> dict[str, Any]:
    manifest = [{k: v for k, v in r.items() if k != "recorded_at"}
                for r in tables.get("redaction_records", [])]
    return {**tables, "redaction_records": manifest}


def test_the_column_screen_redacts_exactly_what_redacting_every_value_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = corpus()
    env = env_for(secrets)
    batch = _batch_with_secrets([p.text for p in secrets], clean=40)
    screened = redact_tables(batch, Redactor(env=env))
    # The reference: every column redacted value by value.
    monkeypatch.setattr(sink_rows, "_may_redact", lambda redactor, columns: True)
    everything = redact_tables(batch, Redactor(env=env))
    assert _without_times(screened) == _without_times(everything)
    assert screened["redaction_records"]  # the batch did hold secrets
    stored = json.dumps({t: c for t, c in screened.items() if t != "redaction_records"}, default=str)
    assert not [p.kind for p in secrets if p.secret in stored]


def test_a_clean_batch_is_cleared_whole_and_left_as_it_came() -> None:
    batch = _batch_with_secrets([], clean=30)
    assert redact_tables(batch, Redactor(env={})) == batch


@pytest.mark.parametrize(("columns", "maybe"), [
    ([[1, None, 2.5, True], ["plain text", None]], False),
    ([["text"], [type("Sub", (str,), {})("a str subclass")]], True),  # looked at value by value, as before
    ([[b"bytes"]], True),
    ([["\ud800 a lone surrogate"]], True),
    ([[("a tuple", "with a password in it")]], True),  # structures are in the JSON with their texts
    ([[{"api_key": "x"}]], True),
    ([[{1: "a non-text key"}]], True),
])
def test_what_the_column_screen_clears(columns: list[list[Any]], maybe: bool) -> None:
    assert sink_rows._may_redact(Redactor(env={}), columns) is maybe


def test_with_a_users_pattern_a_structure_is_walked_and_plain_columns_are_screened() -> None:
    redactor = Redactor(env={}, extra_patterns={"ticket": r"TICKET-[0-9]+"})
    assert sink_rows._may_redact(redactor, [[{"note": "plain"}]]) is True
    assert sink_rows._may_redact(redactor, [["plain", None, 3]]) is False
    assert sink_rows._may_redact(redactor, [["see TICKET-42"]]) is True


def _observations() -> list[Any]:
    rng = random.Random(38)
    alphabet = "0123456789abcdefsxzT :.-+_/\n\t\u00e9\u0663ABCDEF"  # digits, hex, units, spacing, non-ASCII
    out: list[Any] = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(3000)]
    out += ["2024-01-02T03:04:05.123+01:00 took 5 ms at 0xdeadBEEF", "bash: line 12: foo: command not found",
            "é5 ٣4 x1_2 12:30:45", "550e8400-e29b-41d4-a716-446655440000", "", None]
    if CORPUS.is_dir():
        out += [entry.get("observation") for trajectory in _trajectories(10) for entry in trajectory]
    return out


@pytest.mark.parametrize(("column", "one"),
                         [(progress_keys, progress_key), (near_observation_keys, near_observation_key)])
def test_outcome_keys_over_a_column_equal_the_keys_value_by_value(column: Any, one: Any) -> None:
    values = _observations()
    assert column(values) == [None if v is None else one(v) for v in values]
    odd = ["x 5 ms", b"bytes", 3, None, "\ud800 a lone surrogate"]  # not text, or not encodable: no key
    assert column(odd) == [one("x 5 ms"), None, None, None, None]


def test_a_users_anchored_or_multi_line_pattern_is_applied_to_what_reaches_the_store(db: Path) -> None:
    # The batch screen tried a user's patterns on the batch's JSON text, where ``^...$`` never
    # matches and a newline is written as two characters: the batch was cleared and these values were
    # stored as they came, though ``Redactor.text`` redacts each of them.
    redactor = Redactor(env={}, extra_patterns={"ticket": r"^TK[0-9]{6}$", "pair": r"alpha\nomega"})
    provider, memory = _memory_provider()
    with Run(provider.get_tracer("t"), "agent") as run:
        for text in ("TK123456", "alpha\nomega", "nothing here"):
            with run.step("plain") as step, step.tool_call("ls", {"path": "."}) as call:
                call.result(text)
    exporter = DuckDBSpanExporter(db, redactor=redactor)
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
    stored = query(db, "SELECT observation FROM tool_call_records ORDER BY step")
    assert stored == [("[REDACTED:ticket]",), ("[REDACTED:pair]",), ("nothing here",)]
