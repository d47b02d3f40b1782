"""Span exports from other backends import through the one span-to-record mapping OTLP uses.

One real run (smolagents under OpenInference's instrumentor, the scripted Chat Completions server on
loopback, the SDK's in-memory exporter; tests/span_writer.py) is written as OTLP JSON by the OTel
exporter's encoder and as a nested span tree, a Phoenix span dataframe (JSON and Parquet), Jaeger
JSON and Zipkin v2 JSON. Each container, imported alone into its own store, must give the run,
steps, tool calls and end label the OTLP JSON file gives: one mapping, several containers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.ingest.files.span_exports import decode_document, flatten, sniff_document
from looptrace.tracer.store import Store

from .conftest import ROOT, python_env, query
from .framework_agent import openai_script

# One worker builds this module's set-up once (tests/README.md: shared set-ups under xdist).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("span_exports")]

CONTAINERS = {"tree.json": "span-tree", "phoenix.json": "phoenix-spans", "phoenix.parquet": "phoenix-spans",
              "jaeger.json": "jaeger-json", "zipkin.json": "zipkin-json"}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("exports")
    with ChatCompletionsServer(openai_script("final_answer")) as chat:
        done = subprocess.run([sys.executable, "-m", "tests.span_writer", chat.base_url, str(out)], cwd=ROOT,
                              env=python_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def _imported(folder: Path, name: str, tmp: Path) -> tuple[dict[str, int], list[tuple[object, ...]]]:
    store = Store(tmp / f"{name}.duckdb")
    report = import_paths(store, [folder / name])
    assert report.skipped == [], report.skipped
    analyze_store(store)
    facts = query(tmp / f"{name}.duckdb", """
        SELECT r.status, r.n_steps, r.answer IS NOT NULL, d.label,
               (SELECT list(t.tool || ' ' || coalesce(CAST(t.args AS VARCHAR), '') ORDER BY t.step, t.call_index)
                FROM tool_calls t WHERE t.run_id = r.run_id),
               (SELECT list(coalesce(t.error_type, '-') ORDER BY t.step, t.call_index)
                FROM tool_calls t WHERE t.run_id = r.run_id)
        FROM runs r LEFT JOIN diagnoses d ON d.run_id = r.run_id AND d.is_primary ORDER BY r.run_id""")
    return report.by_format, facts


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_container_maps_like_otlp(written: Path, tmp_path: Path, name: str) -> None:
    formats, reference = _imported(written, "otlp.json", tmp_path)
    assert formats == {"otlp-json": 1} and len(reference) == 1
    status, steps, answered, label, tools, _ = reference[0]
    assert (status, steps, answered, label) == ("ok", 4, True, "ok")  # the run's 4 turns, the last its answer
    assert tools == ['read_file {"path": "a.txt"}', 'delete_everything {"force": true}', 'read_file {"path": "b.txt"}',
                     'final_answer {"answer": "a.txt and b.txt are both short files."}']  # the end tool's call
    got_formats, got = _imported(written, name, tmp_path)
    assert got_formats == {CONTAINERS[name]: 1}
    assert got == reference


def test_importing_a_container_twice_adds_nothing(written: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "s.duckdb")
    first = import_paths(store, [written / "jaeger.json"])
    again = import_paths(store, [written / "jaeger.json"])
    assert (first.runs_imported, again.runs_imported, again.runs_present) == (1, 0, 1)


def test_sniffing_and_flattening() -> None:
    assert sniff_document({"trace_id": "ab", "spans": [{"span_id": "01", "child_spans": []}]}) == "span-tree"
    assert sniff_document({"data": [{"traceID": "ab", "spans": []}]}) == "jaeger-json"
    assert sniff_document([{"traceId": "ab", "id": "01"}]) == "zipkin-json"
    assert sniff_document([{"context.span_id": "01", "name": "x"}]) == "phoenix-spans"
    assert sniff_document({"messages": []}) is None
    assert flatten({"llm": {"input_messages": [{"message": {"role": "user", "content": "hi"}}]}, "tags": ["a"]}) == {
        "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": "hi", "tags": ["a"]}
    tree = {"trace_id": "0af7651916cd43dd8448eb211c80319c", "spans": [
        {"span_id": "b7ad6b7169203331", "span_name": "root", "timestamp": "2025-03-19T16:44:04.595001Z",
         "duration": "PT1M5.5S", "child_spans": [{"span_id": "00f067aa0ba902b7", "span_name": "child"}]}]}
    root, child = decode_document(tree)
    assert (child.parent_span_id, child.trace_id) == (root.span_id, root.trace_id)
    assert root.end_ns is not None and root.start_ns is not None and root.end_ns - root.start_ns == 65_500_000_000
    assert child.end_ns is None  # an unknown end stays unknown
