"""Secrets never on disk: planted in prompts, tool arguments, observations and headers, then
searched for in the raw bytes of every file looptrace wrote, and in every stored value."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import duckdb
import pytest
import pyarrow.parquet as pq

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.scripted import Script, act, finish
from looptrace.loop.server import MessagesServer
from looptrace.loop.tools import Tool
from looptrace.tracer import Tracing
from looptrace.tracer.sink.redact import Hits, Redactor, restore_env
from looptrace.tracer.store import Store

API_KEY = "sk-ant-api03-PLANTEDsecretKEY0123456789abcdef"
ENV_SECRET = "hunter2-the-database-password-9f8e7d"
AWS = "AKIAIOSFODNN7EXAMPLE"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9planted.token.value"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEplantedPRIVATEkeyMATERIAL\n-----END RSA PRIVATE KEY-----"
COOKIE_VALUE = "sessionid-PLANTED-cookie-7a6b5c"
SECRETS = [API_KEY, ENV_SECRET, AWS, "eyJhbGciOiJIUzI1NiJ9planted", "MIIEplantedPRIVATEkeyMATERIAL", COOKIE_VALUE]
CANARY = "CANARY-visible-text-4242"


def fetch(url: str, headers: dict[str, str]) -> str:
    return f"GET {url} -> 200 {CANARY}\nrequest headers: " + json.dumps(headers)


def test_planted_secrets_are_in_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("DB_PASSWORD", ENV_SECRET)
    db = tmp_path / "store.duckdb"
    task = f"Deploy with AWS key {AWS} and check the db (password {ENV_SECRET}). {CANARY}"
    tool = Tool("fetch", "HTTP GET", {"type": "object", "properties": {
        "url": {"type": "string"}, "headers": {"type": "object"}}, "required": ["url"]}, fetch)
    script = Script({task: [
        act("fetch", {"url": "https://example.test", "headers": {"Authorization": BEARER, "Cookie": COOKIE_VALUE,
                                                                 "X-Api-Key": API_KEY}},
            f"I will call the API with {API_KEY}. {CANARY}"),
        act("fetch", {"url": "https://example.test/key", "token": ENV_SECRET}),
        finish(f"The private key is {PEM}; the response set-cookie: {COOKIE_VALUE}"),
    ]})
    with MessagesServer(script) as server, Tracing(db) as tracing:
        model = AnthropicModel("scripted", base_url=server.base_url, retry=RetryPolicy(base_delay=0.01))
        agent = Agent(model, [tool], tracing, system=f"Operator note: the key is {API_KEY}.")
        result = agent.run(task)
    assert result.status == "ok"
    assert server.requests[0]["headers"].get("x-api-key") == API_KEY or \
        API_KEY in server.requests[0]["headers"].get("authorization", "")  # the SDK did send it
    Store(db).compact()

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "store.duckdb" for p in written)
    for path in written:
        data = path.read_bytes()
        for secret in SECRETS:
            assert secret.encode() not in data, f"{secret!r} found in {path}"

    # Every stored value, decoded: the canary proves this search sees the content.
    conn = duckdb.connect(str(db), read_only=True)
    text = []
    for (table,) in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
                                 ).fetchall():
        for row in conn.execute(f"SELECT * FROM {table}").fetchall():
            text.append(" ".join(str(v) for v in row))
    conn.close()
    for path in written:
        if path.suffix == ".parquet":
            text.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    everything = "\n".join(text)
    assert CANARY in everything
    for secret in SECRETS:
        assert secret not in everything, secret
    # What was redacted, and by which rule, is recorded without the value.
    assert "[REDACTED:anthropic_key]" in everything and "[REDACTED:env:DB_PASSWORD]" in everything
    assert "[REDACTED:aws_access_key]" in everything and "[REDACTED:private_key]" in everything
    conn = duckdb.connect(str(db), read_only=True)
    recorded = [json.loads(r[0]) for r in conn.execute(
        "SELECT attributes->>'$.\"looptrace.redactions\"' FROM spans WHERE attributes->>'$.\"looptrace.redactions\"' "
        "IS NOT NULL").fetchall()]
    conn.close()
    rules = {hit["rule"] for spans in recorded for hit in spans}
    assert {"anthropic_key", "env:DB_PASSWORD", "secret_key", "aws_access_key"} <= rules


def test_a_replay_can_put_env_secrets_back() -> None:
    redactor = Redactor(env={"MY_TOKEN": "tok-1234567890"})
    hidden = redactor.text("use tok-1234567890 here")
    assert hidden == "use [REDACTED:env:MY_TOKEN] here"
    assert restore_env(hidden, {"MY_TOKEN": "tok-1234567890"}) == "use tok-1234567890 here"


def test_secret_keys_in_structures_and_json_text() -> None:
    hits: Hits = {}
    r = Redactor(env={})
    out = r.value({"api_key": "abc", "nested": {"Authorization": "x y", "max_tokens": 5},
                   "args": json.dumps({"password": "p", "path": "a.txt"})}, hits)
    assert out["api_key"] == "[REDACTED:secret_key]" and out["nested"]["Authorization"] == "[REDACTED:secret_key]"
    assert out["nested"]["max_tokens"] == 5
    assert json.loads(out["args"]) == {"password": "[REDACTED:secret_key]", "path": "a.txt"}
    assert hits == {("api_key", "secret_key"): 1, ("nested.Authorization", "secret_key"): 1,
                    ("args.password", "secret_key"): 1}


def test_a_raising_callback_fails_closed_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    def boom(text: str) -> str:
        raise RuntimeError("bad callback")

    r = Redactor(env={}, callback=boom)
    with caplog.at_level(logging.WARNING, logger="looptrace.redact"):
        assert r.text("anything") == "[REDACTED:callback_failed]"
        assert r.text("more") == "[REDACTED:callback_failed]"
    assert len(caplog.records) == 1


def test_user_patterns_and_callbacks_apply() -> None:
    r = Redactor(env={}, extra_patterns={"ticket": r"TICKET-\d+"}, callback=lambda t: t.replace("Ada", "[name]"))
    assert r.text("Ada filed TICKET-123") == "[name] filed [REDACTED:ticket]"


# The batch test's edges, with expected values written out (the property test that compared it
# with redaction's own output was circular; tests/test_redaction_structure.py checks planted
# secrets instead).
_ENV = {"DB_PASSWORD": 'db "pass\\word" 42', "API_TOKEN": "tok-1234567890"}


def test_the_cheap_batch_test_clears_ordinary_spans_and_catches_each_edge() -> None:
    r = Redactor(env=_ENV)
    ordinary = {"gen_ai.tool.name": "read_file", "gen_ai.tool.call.arguments": '{"path": "src/app.py"}',
                "gen_ai.tool.call.result": "def main():\n    return 0\n" * 100_000, "looptrace.step.index": 3}
    assert not r.may_redact([ordinary, {"looptrace.step.thought": "read the app"}], ["timeout"])
    for text in ["to\u212aen = abc", "\u017fecret: hunter22", "author\u0131zation: xyz12345", 'x db "pass\\word" 42 y',
                 "Bearer abcdefghijkl", "tok-1234567890"]:
        assert r.text(text) != text, text
        assert r.may_redact([{"gen_ai.tool.call.result": text}]), text
    assert r.may_redact([{"gen_ai.tool.call.arguments": '{"client_secret": 5}'}])
    assert r.may_redact([{"http.request.header.authorization": "x"}])
    assert r.may_redact([{"headers": {"auth": "abc"}}]) and r.may_redact([{"calls": [{"pwd": "abc"}]}])
    assert not r.may_redact([{"finish_reasons": ("end_turn",), "n": 3, "ok": True, "none": None}])
    assert r.may_redact([{"gen_ai.tool.call.result": "\udc80"}])  # orjson refuses it: looked at closely


def test_no_content_mode_keeps_metadata_and_sizes_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false")
    db = tmp_path / "store.duckdb"
    with Tracing(db) as tracing, tracing.run("a", task=f"secret task {CANARY}", model="claude-haiku-4-5") as run:
        with run.step(f"thought {CANARY}") as step:
            request = {"model": "claude-haiku-4-5", "max_tokens": 10, "messages": [{"role": "user", "content": CANARY}]}
            with step.llm_call(request) as call:
                call.response({"content": [{"type": "text", "text": CANARY}], "stop_reason": "end_turn",
                               "usage": {"input_tokens": 12, "output_tokens": 3}})
            with step.tool_call("read", {"path": CANARY}) as tool:
                tool.result("x" * 1234)
        run.finish("ok", answer=CANARY)
    assert not tracing.capture_content
    for path in (p for p in tmp_path.rglob("*") if p.is_file()):
        assert CANARY.encode() not in path.read_bytes(), path
    from tests.conftest import query

    assert query(db, "SELECT task, answer, n_steps, input_tokens, output_tokens FROM runs") == [(None, None, 1, 12, 3)]
    assert query(db, "SELECT thought, tool, args, observation, observation_bytes FROM steps") == [
        (None, "read", None, None, 1234)]
    assert query(db, "SELECT count(*) FROM llm_call_records WHERE messages_append IS NULL AND response IS NULL") == [(1,)]


def test_spans_sent_over_otlp_are_redacted_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies: list[bytes] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("DB_PASSWORD", ENV_SECRET)
    try:
        with Tracing(None, otlp_endpoint=f"http://127.0.0.1:{server.server_address[1]}") as tracing:
            with tracing.run("a", task=f"use {API_KEY} and {ENV_SECRET} {CANARY}") as run, run.step() as step:
                with step.tool_call("fetch", {"headers": {"Authorization": BEARER}}) as call:
                    call.result(f"password={ENV_SECRET}")
    finally:
        server.shutdown()
    sent = b"".join(bodies)
    assert CANARY.encode() in sent
    for secret in (API_KEY, ENV_SECRET, "eyJhbGciOiJIUzI1NiJ9planted"):
        assert secret.encode() not in sent, secret
