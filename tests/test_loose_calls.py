"""A bare loop's model calls, each its own trace, are one run through both roads in: `collect` (the
receiver holds loose calls until the loop is quiet) and `import` of an OTLP JSON file, with the same rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.store import Store

from .conftest import query
from .test_ingest import provider, send, to_otlp_json


def bare_loop(tracer: Tracer) -> None:
    """Three OpenInference chat spans with no parent: read_file, an undeclared tool, the answer."""
    tools = [{"tool": {"json_schema": json.dumps({"type": "function", "function": {"name": "read_file"}})}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read a.txt"}]
    turns = [("read_file", '{"path": "a.txt"}', "A"), ("rm_rf", "{}", "Unknown tool rm_rf"), (None, None, None)]
    for i, (name, args, result) in enumerate(turns):
        attributes: dict[str, Any] = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
                                      "llm.token_count.prompt": 100 * (i + 1), "llm.token_count.completion": 10}
        for k, m in enumerate(history):
            for key, value in m.items():
                attributes[f"llm.input_messages.{k}.message.{key}"] = value
        for t, tool in enumerate(tools):
            attributes[f"llm.tools.{t}.tool.json_schema"] = tool["tool"]["json_schema"]
        out = "llm.output_messages.0.message"
        attributes[f"{out}.role"] = "assistant"
        if name is None:
            attributes[f"{out}.content"] = "done"
        else:
            attributes[f"{out}.tool_calls.0.tool_call.id"] = f"call_{i}"
            attributes[f"{out}.tool_calls.0.tool_call.function.name"] = name
            attributes[f"{out}.tool_calls.0.tool_call.function.arguments"] = args
        tracer.start_span("ChatCompletion", attributes=attributes).end()
        if name is not None:
            history += [{"role": "assistant", "content": f"calling {name}"},
                        {"role": "tool", "tool_call_id": f"call_{i}", "content": result}]


STEPS = "SELECT step, tool, args, observation, error_type FROM steps ORDER BY step, call_index"
EXPECTED = [(1, "read_file", '{"path": "a.txt"}', "A", None), (2, "rm_rf", "{}", "Unknown tool rm_rf", "tool_not_found"),
            (3, None, None, None, None)]


def test_collect_and_import_make_one_run_of_a_bare_loop(db: Path, tmp_path: Path) -> None:
    with OtlpReceiver(db, port=0, settle=0) as receiver:
        send(receiver.url, bare_loop)
        receiver.flush()
        assert receiver.stats.traces_written == 3
    assert query(db, "SELECT n_steps, n_llm_calls, input_tokens, answer FROM runs") == [(3, 3, 600, "done")]
    assert query(db, STEPS) == EXPECTED
    memory = InMemorySpanExporter()
    p, tracer = provider(memory)
    bare_loop(tracer)
    p.shutdown()
    path = tmp_path / "loop.json"
    path.write_text(json.dumps(to_otlp_json(encode_spans(memory.get_finished_spans()))))
    imported = tmp_path / "imported.duckdb"
    assert import_paths(Store(imported), [path]).runs_imported == 1
    assert query(imported, STEPS) == EXPECTED
