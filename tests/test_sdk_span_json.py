"""The OpenTelemetry SDK's own span JSON as an import format (``tracer/ingest/files/sdk_spans.py``).

Each file is written by the SDK's real ``ConsoleSpanExporter`` while a real framework or instrumented
SDK (tests/framework_agent.py, the `frameworks` extra) runs the scripted conversation; ``looptrace
import`` must make one run of it with every tool call's name, arguments and result, as the same client
gives over OTLP (tests/test_frameworks.py). The other containers people save those objects in (a list,
JSON lines, ``{"spans": [...]}``, integer ids) are made from one real file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.loop.server import MessagesServer
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.ingest.files.sdk_spans import parse_text, sniff_text
from looptrace.tracer.store import Store

from .conftest import ROOT, python_env, query
from .framework_agent import CLIENTS, anthropic_script, openai_script
from .test_frameworks import EXPECTED, FINAL_CALL

pytestmark = pytest.mark.slow


def write_console_json(client: str, path: Path) -> None:
    final_tool = "final_answer" if client.startswith("smolagents") else None
    with ChatCompletionsServer(openai_script(final_tool)) as chat, MessagesServer(anthropic_script) as messages:
        url = messages.base_url if client.startswith("anthropic") else chat.base_url
        done = subprocess.run([sys.executable, "-m", "tests.framework_agent", client, url, f"file:{path}"],
                              cwd=ROOT, env=python_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]


def _tool_calls(db: Path) -> list[tuple[Any, ...]]:
    rows = query(db, "SELECT step, tool, args, observation, error_type FROM steps WHERE tool IS NOT NULL "
                     "ORDER BY step, call_index")
    return [(step, tool, json.loads(args), obs if error is None else None, error)
            for step, tool, args, obs, error in rows]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_console_span_file_imports_as_one_run_with_every_tool_call(client: str, tmp_path: Path) -> None:
    path = tmp_path / f"{client.replace('+', '_')}.json"
    write_console_json(client, path)
    assert sniff_text(path.read_text())
    db = tmp_path / "store.duckdb"
    report = import_paths(Store(db), [path])
    assert report.by_format == {"otel-sdk-json": 1}, report
    assert [n for (n,) in query(db, "SELECT n_steps FROM runs")] == [4]
    # smolagents answers with its end tool, whose call is its last step's (as over OTLP).
    assert _tool_calls(db) == EXPECTED + ([FINAL_CALL] if client.startswith("smolagents") else [])


def test_the_containers_people_save_sdk_spans_in(tmp_path: Path) -> None:
    console = tmp_path / "console.json"
    write_console_json("openai+genai", console)
    spans = [json.loads(s) for s in _split(console.read_text())]
    as_ints = [{**s, "context": {**s["context"], "trace_id": int(s["context"]["trace_id"], 16),
                                 "span_id": int(s["context"]["span_id"], 16)},
                "parent_id": int(s["parent_id"], 16) if s.get("parent_id") else None} for s in spans]
    forms = {"list.json": json.dumps(spans), "lines.jsonl": "\n".join(json.dumps(s) for s in spans),
             "wrapped.json": json.dumps({"spans": spans}), "ints.json": json.dumps(as_ints)}
    reference = parse_text(console.read_text())
    assert len(reference) == len(spans) == 4
    for name, text in forms.items():
        path = tmp_path / name
        path.write_text(text)
        assert parse_text(text) == reference, name
        db = tmp_path / f"{name}.duckdb"
        import_paths(Store(db), [path])
        assert _tool_calls(db) == EXPECTED, name


def _split(text: str) -> list[str]:
    """The pretty-printed objects ConsoleSpanExporter writes one after another."""
    decoder, i, out = json.JSONDecoder(), 0, []
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        _, end = decoder.raw_decode(text, i)
        out.append(text[i:end])
        i = end
    return out
