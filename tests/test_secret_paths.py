"""No planted secret reaches disk, whichever way the data comes in, and the data still arrives.

A corpus of credentials (``secret_corpus.py``, random suffixes made per test) goes through every
road in: the manual API, the Anthropic instrumentor over the real SDK and the local Messages API
server, looptrace's own loop, OTLP/JSON and OTLP/protobuf posted to the receiver, a ``.traj`` file
and a chat log imported, and out again through ``looptrace export``, ``export-test`` and OTLP out.
Every file under the store's folder (DuckDB file, WAL, segments, quarantine) is searched as raw
bytes and, since Parquet and DuckDB compress strings, decoded too. The runs and steps that were
planted must all be there (counted from what was sent, not from the redactor), so a redactor
that dropped everything would fail.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import duckdb
import pyarrow.parquet as pq
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, Status, StatusCode

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.scripted import Script, act, finish
from looptrace.loop.server import MessagesServer
from looptrace.loop.tools import Tool
from looptrace.tracer import Tracing
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.protocol import JSON, PROTOBUF
from looptrace.tracer.spans.anthropic import AnthropicInstrumentor
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query
from .secret_corpus import Planted, corpus, env_for, payload
from .test_ingest import post, to_otlp_json

CANARY = "CANARY-stored-text-5150"
MODEL = "claude-haiku-4-5"


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> list[Planted]:
    kinds = corpus()
    assert len({p.kind for p in kinds}) >= 25
    monkeypatch.setenv("ANTHROPIC_API_KEY", next(p.secret for p in kinds if p.kind == "anthropic"))
    for name, value in env_for(kinds).items():
        monkeypatch.setenv(name, value)
    return kinds


# -- searching ---------------------------------------------------------------------------------------


def decoded(folder: Path) -> str:
    """Every value of every DuckDB file and Parquet file under ``folder``, as text."""
    out: list[str] = []
    for path in sorted(folder.rglob("*")):
        if path.suffix == ".parquet":
            out.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
        elif path.suffix == ".duckdb":
            conn = duckdb.connect(str(path), read_only=True)
            try:
                for (table,) in conn.execute("SELECT table_name FROM information_schema.tables "
                                             "WHERE table_type = 'BASE TABLE'").fetchall():
                    out.extend(" ".join(map(str, row)) for row in conn.execute(f'SELECT * FROM "{table}"').fetchall())
            finally:
                conn.close()
    return "\n".join(out)


def assert_nothing_leaked(folder: Path, planted: list[Planted]) -> str:
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files, folder
    for path in files:
        data = path.read_bytes()
        for p in planted:
            assert p.secret.encode() not in data, f"{p.kind} in {path}"
    text = decoded(folder)
    for p in planted:
        assert p.secret not in text, f"{p.kind} in a decoded value under {folder}"
    return text


def check_store(db: Path, planted: list[Planted], runs: int, steps: int) -> None:
    """Nothing leaked, before and after compaction; the planted runs and steps all arrived."""
    assert_nothing_leaked(db.parent, planted)
    assert query(db, "SELECT count(*), sum(n_steps) FROM runs") == [(runs, steps)]
    Store(db).compact()
    text = assert_nothing_leaked(db.parent, planted)
    assert CANARY in text  # the search above saw the stored content
    fired = {r[0] for r in query(db, "SELECT DISTINCT rule FROM redactions")}
    assert "secret_key" in fired and len(fired) >= 5, fired


# -- the roads in ----------------------------------------------------------------------------------


def test_manual_api(tmp_path: Path, planted: list[Planted]) -> None:
    db = tmp_path / "store" / "traces.duckdb"
    text = payload(planted, CANARY)
    with Tracing(db) as tracing, tracing.run("manual", task=text, model=MODEL) as run:
        for p in planted:
            with run.step(p.text) as step:
                request = {"model": MODEL, "max_tokens": 10, "system": text,
                           "messages": [{"role": "user", "content": p.text}]}
                with step.llm_call(request) as call:
                    call.response({"content": [{"type": "text", "text": p.text}], "stop_reason": "tool_use",
                                   "usage": {"input_tokens": 5, "output_tokens": 2}})
                with step.tool_call("fetch", {"url": p.text, "headers": {"Authorization": p.text}}) as tool:
                    tool.result(p.text)
        run.finish("ok", answer=text)
    check_store(db, planted, 1, len(planted))


def _fetch(planted: list[Planted]) -> Tool:
    by_kind = {p.kind: p.text for p in planted}
    return Tool("fetch", "fetch a thing", {"type": "object", "properties": {"kind": {"type": "string"}},
                                           "required": ["kind"]}, lambda kind, **_: f"{by_kind[kind]}\n{CANARY}")


def _script(task: str, planted: list[Planted]) -> Script:
    return Script({task: [*(act("fetch", {"kind": p.kind, "note": p.text}, p.text) for p in planted),
                          finish(task)]})


def test_the_loop(tmp_path: Path, planted: list[Planted]) -> None:
    db = tmp_path / "store" / "traces.duckdb"
    task = payload(planted, CANARY)
    with MessagesServer(_script(task, planted)) as server, Tracing(db) as tracing:
        model = AnthropicModel("scripted", base_url=server.base_url, retry=RetryPolicy(base_delay=0.01))
        result = Agent(model, [_fetch(planted)], tracing, system=task).run(task)
    assert result.status == "ok"
    check_store(db, planted, 1, len(planted) + 1)


def test_the_anthropic_instrumentor(tmp_path: Path, planted: list[Planted]) -> None:
    db = tmp_path / "store" / "traces.duckdb"
    task = payload(planted, CANARY)
    tool = _fetch(planted)
    with MessagesServer(_script(task, planted)) as server, Tracing(db) as tracing:
        instrumentor = AnthropicInstrumentor(tracing).instrument()
        try:
            client = anthropic.Anthropic(api_key=planted[0].secret, base_url=server.base_url, max_retries=0)
            messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
            while True:
                reply = client.messages.create(model=MODEL, max_tokens=512, system=task, messages=messages,
                                               tools=[{"name": "fetch", "input_schema": tool.input_schema}])
                messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True)
                                                                  for b in reply.content]})
                calls = [b for b in reply.content if b.type == "tool_use"]
                if any(c.name == "done" for c in calls) or not calls:
                    break
                messages.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": c.id, "content": str(tool.run(kind=c.input["kind"]))}
                    for c in calls]})
        finally:
            instrumentor.uninstrument()
    check_store(db, planted, 1, len(planted) + 1)


def _otlp_request(planted: list[Planted]) -> Any:
    """A GenAI-convention agent trace with a secret in every field a span has."""
    memory = InMemorySpanExporter()
    resource = Resource.create({"service.name": "corpus", "deploy.note": planted[0].text,
                                "deploy.api_token": planted[1].secret})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("corpus")
    task = payload(planted, CANARY)
    with tracer.start_as_current_span("invoke_agent corpus", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "corpus", "gen_ai.request.model": "gpt-4o"}
    ) as root:
        history: list[Any] = [{"role": "user", "parts": [{"type": "text", "content": task}]}]
        for i, p in enumerate(planted):
            reply = {"role": "assistant", "finish_reason": "tool_call", "parts": [{"type": "text", "content": p.text}]}
            with tracer.start_as_current_span(f"chat gpt-4o {p.text}", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 5,
                    "gen_ai.input.messages": json.dumps(history), "gen_ai.output.messages": json.dumps([reply]),
                    "http.request.header.authorization": p.secret}) as chat:
                chat.add_event(f"log {p.text}", {"line": p.text})
            history.append(reply)
            with tracer.start_as_current_span(f"execute_tool fetch {p.text}", links=[
                    Link(root.get_span_context(), {"why": p.text})], attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch",
                    "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": json.dumps({"q": p.text}),
                    "gen_ai.tool.call.result": f"{p.text}\n{CANARY}"}) as call:
                call.set_status(Status(StatusCode.ERROR, p.text))
            history.append({"role": "tool", "parts": [{"type": "tool_call_response", "id": f"call_{i}"}]})
    provider.shutdown()
    return encode_spans(memory.get_finished_spans())


def _hex_links(doc: dict[str, Any]) -> dict[str, Any]:
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for link in span.get("links", []):
                    for key in ("traceId", "spanId"):
                        link[key] = base64.b64decode(link[key]).hex()
    return doc


@pytest.mark.parametrize("media", [JSON, PROTOBUF])
def test_otlp_receiver(tmp_path: Path, planted: list[Planted], media: str) -> None:
    db = tmp_path / "store" / "traces.duckdb"
    request = _otlp_request(planted)
    body = json.dumps(_hex_links(to_otlp_json(request))).encode() if media == JSON else request.SerializeToString()
    with OtlpReceiver(db, port=0, settle=0) as receiver:
        status, _, answer = post(receiver.url, body, media)
        assert status == 200, answer
    check_store(db, planted, 1, len(planted))
    assert query(db, "SELECT count(*) FROM spans") == [(1 + 2 * len(planted),)]


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def _traj(planted: list[Planted]) -> dict[str, Any]:
    task = payload(planted, CANARY)
    steps = [{"action": f"curl -H '{p.text}'", "observation": p.text, "response": p.text, "thought": p.text,
              "state": "{}"} for p in planted]
    history = [{"role": "system", "content": "SETTING: " + task}, {"role": "user", "content": "ISSUE: " + task}]
    for s in steps:
        history += [{"role": "assistant", "content": s["response"], "thought": s["thought"], "action": s["action"]},
                    {"role": "user", "content": s["observation"]}]
    return {"environment": "swe_main", "trajectory": steps, "history": history,
            "info": {"exit_status": "submitted", "submission": task,
                     "model_stats": {"instance_cost": 1.0, "tokens_sent": 100, "tokens_received": 10,
                                     "api_calls": len(steps)}}}


def _chat(planted: list[Planted]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": payload(planted, CANARY)}]
    for p in planted:
        messages += [{"role": "assistant", "content": p.text}, {"role": "user", "content": p.text}]
    return messages


@pytest.mark.parametrize("kind", ["traj", "chat"])
def test_file_import(tmp_path: Path, planted: list[Planted], kind: str) -> None:
    db = tmp_path / "store" / "traces.duckdb"
    source = _write(tmp_path / "in" / "gpt-4o" / "run.traj", _traj(planted)) if kind == "traj" else \
        _write(tmp_path / "in" / "chat.json", _chat(planted))
    report = import_paths(Store(db), [source])
    assert report.runs_imported == 1 and not report.skipped, report
    check_store(db, planted, 1, len(planted))


# -- the roads out ---------------------------------------------------------------------------------


def looptrace(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in python_env().items() if not k.startswith("OTEL_EXPORTER_OTLP")}
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


@pytest.mark.slow
def test_exports_carry_only_redacted_data(tmp_path: Path, planted: list[Planted]) -> None:
    db = tmp_path / "store" / "traces.duckdb"
    task = payload(planted, CANARY)
    with MessagesServer(_script(task, planted)) as server, Tracing(db) as tracing:
        model = AnthropicModel("scripted", base_url=server.base_url, retry=RetryPolicy(base_delay=0.01))
        Agent(model, [_fetch(planted)], tracing, system=task).run(task)
    [(run_id,)] = query(db, "SELECT run_id FROM runs")
    out = tmp_path / "out"
    done = looptrace("export", "--db", str(db), "--parquet", str(out / "parquet"))
    assert done.returncode == 0, done.stderr
    done = looptrace("export-test", run_id, "--db", str(db), "-o", str(out / "tests" / "test_corpus_run.py"))
    assert done.returncode == 0, done.stderr
    text = assert_nothing_leaked(out, planted)
    assert CANARY in text or any(CANARY in p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert len(list(out.rglob("*.parquet"))) >= 3 and list((out / "tests").rglob("*"))


@pytest.fixture
def otlp_bodies() -> Iterator[tuple[str, list[bytes]]]:
    bodies: list[bytes] = []

    class Collect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", bodies
    finally:
        server.shutdown()
        server.server_close()


def test_otlp_out(planted: list[Planted], otlp_bodies: tuple[str, list[bytes]]) -> None:
    url, bodies = otlp_bodies
    with Tracing(None, otlp_endpoint=url) as tracing:
        with tracing.run("a", task=payload(planted, CANARY)) as run:
            for p in planted:
                with run.step(p.text) as step, step.tool_call("fetch", {"q": p.text, "apiKey": p.secret}) as call:
                    call.result(p.text)
    sent = b"".join(bodies)
    assert CANARY.encode() in sent
    for p in planted:
        assert p.secret.encode() not in sent, p.kind
    assert sent.count(b"execute_tool") >= len(planted)
