"""Redaction keeps structure and survives bad input.

The oracle is always what was planted (``secret_corpus.py``), never the redactor's own detector:
every planted secret, in every embedding (JSON-in-JSON, a log line with escapes, multi-line text),
must be gone from what the sink would write, and what was valid JSON must still be. Bad input
(invalid UTF-8, binary values, 10 MB strings, JSON 10,000 deep, a raising rule) is redacted or cut
with a marker: never a crash, never raw.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from looptrace.tracer import Tracing
from looptrace.tracer.sink import Redactor
from looptrace.tracer.sink.redact import FAILED, TOO_DEEP
from looptrace.tracer.sink.rows import redact_tables
from looptrace.tracer.store import Store

from .conftest import query
from .secret_corpus import Planted, corpus, env_for

CANARY = "CANARY-kept-8080"
N_KINDS = len(corpus(random.Random(0)))

Embed = Callable[[str], str]
EMBEDDINGS: dict[str, Embed] = {
    "plain": lambda t: t,
    "multi_line": lambda t: f"first line\n{t}\n  indented last line\r\n",
    "json_value": lambda t: json.dumps({"log": t, "n": 1}),
    "json_in_json": lambda t: json.dumps({"body": json.dumps({"log": t, "ok": True})}),
    "json_string": lambda t: json.dumps(t),
    "escaped_in_log_line": lambda t: 'INFO request body="' + json.dumps(t)[1:-1] + '" done',
    "list_in_json": lambda t: json.dumps([{"role": "tool", "content": [{"type": "text", "text": t}]}]),
}


def _valid_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def _through_the_sink(value: str, redactor: Redactor) -> dict[str, str]:
    """``value`` as a tool call's observation (text) and arguments (JSON) after the sink's redaction."""
    args = value if _valid_json(value) else json.dumps({"input": value})
    tables = {"tool_call_records": [{"run_id": "r", "step": 1, "call_index": 0, "tool": "t", "args": args,
                                     "observation": f"{CANARY}\n{value}"}]}
    row = _row(redact_tables(tables, redactor)["tool_call_records"])
    return {"args": row["args"], "observation": row["observation"]}


def _row(data: Any) -> dict[str, Any]:
    """The one row of a table the sink returns as rows or as columns."""
    rows = [dict(zip(data, values)) for values in zip(*data.values())] if isinstance(data, dict) else list(data)
    assert len(rows) == 1
    return rows[0]


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32), kind=st.integers(0, N_KINDS - 1), embed=st.sampled_from(sorted(EMBEDDINGS)),
       noise=st.text(st.characters(blacklist_categories=("Cs",)), max_size=12))
def test_no_planted_secret_survives_in_any_embedding(seed: int, kind: int, embed: str, noise: str) -> None:
    planted = corpus(random.Random(seed))
    p = planted[kind]
    value = EMBEDDINGS[embed](f"{noise}\n{p.text}\n{noise}")
    out = _through_the_sink(value, Redactor(env=env_for(planted)))
    for column, text in out.items():
        assert p.secret not in text, (p.kind, embed, column, text)
    assert _valid_json(out["args"])
    assert _valid_json(out["observation"].split("\n", 1)[1]) == _valid_json(value)
    assert out["observation"].startswith(CANARY)


def test_the_minimal_case_of_the_issue_stays_valid_json() -> None:
    value = json.dumps('GET https://api/?api_key=X&l=1\nlog body="{\\"user\\": 1}"')
    out = Redactor(env={}).value(value)
    assert json.loads(out) == 'GET https://api/?api_key=[REDACTED:secret_key]&l=1\nlog body="{\\"user\\": 1}"'


def test_every_embedding_of_every_kind_arrives_in_a_real_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    planted = corpus()
    for name, value in env_for(planted).items():
        monkeypatch.setenv(name, value)
    db = tmp_path / "traces.duckdb"
    cases = [(p, e) for p in planted for e in EMBEDDINGS]
    with Tracing(db) as tracing, tracing.run("structure", task=CANARY) as run:
        for p, e in cases:
            value = EMBEDDINGS[e](p.text)
            with run.step(value) as step, step.tool_call("echo", {"text": value, "raw": p.text}) as call:
                call.result(value)
        run.finish("ok", answer=CANARY)
    assert query(db, "SELECT n_steps FROM runs") == [(len(cases),)]
    rows = query(db, "SELECT step, thought, args, observation FROM steps ORDER BY step")
    assert [r[0] for r in rows] == list(range(1, len(cases) + 1))
    for (step, thought, args, observation), (p, e) in zip(rows, cases):
        for text in (thought, args, observation):
            assert p.secret not in text, (p.kind, e)
        assert set(json.loads(args)) == {"text", "raw"}
        if _valid_json(EMBEDDINGS[e](p.text)):
            json.loads(thought), json.loads(observation)  # still JSON: nothing was cut out of the encoding
    Store(db).compact()
    for path in (x for x in tmp_path.rglob("*") if x.is_file()):
        data = path.read_bytes()
        assert not any(p.secret.encode() in data for p in planted), path


# -- bad input -------------------------------------------------------------------------------------


def test_invalid_utf8_and_binary_values_are_redacted_not_written_raw() -> None:
    secret = corpus()[0].secret
    r = Redactor(env={})
    as_bytes = b"\xff\xfe binary " + secret.encode() + b" \x00\x80"
    out = r.value(as_bytes)
    assert isinstance(out, str) and secret not in out and "[REDACTED:anthropic_key]" in out
    surrogates = as_bytes.decode("utf-8", "surrogateescape")  # what a lenient reader of bad UTF-8 gives
    out = r.value(surrogates)
    assert secret not in out and "\udcff" in out
    tables = {"tool_call_records": [{"run_id": "r", "step": 1, "call_index": 0, "observation": as_bytes}]}
    row = _row(redact_tables(tables, r)["tool_call_records"])
    assert secret not in str(row["observation"])


def test_a_10_mb_string_is_redacted_whole() -> None:
    secret = corpus()[0].secret
    big = ("x = 1  # filler line\n" * 250_000) + f"token: {secret}\n" + ("y\n" * 1_000_000)
    assert len(big) > 7_000_000
    out = Redactor(env={}).value(big)
    assert secret not in out and len(out) > 7_000_000 and out.endswith("y\n")


def test_json_nested_10000_deep_is_cut_with_a_marker_only_if_it_may_hold_a_secret() -> None:
    secret = corpus()[0].secret
    r = Redactor(env={})
    deep = "[" * 10_000 + json.dumps({"k": secret}) + "]" * 10_000
    out = r.value(deep)
    assert secret not in out and json.loads(out) == TOO_DEEP
    harmless = "[" * 10_000 + "1" + "]" * 10_000
    assert r.value(harmless) == harmless
    nested: object = {"password": "p"}
    for _ in range(10_000):
        nested = [nested]
    hits: dict[tuple[str, str], int] = {}
    out = json.dumps(r.value(nested, hits))  # the outer levels are kept, the rest cut to a marker
    assert TOO_DEEP in out and "password" not in out and any(rule == "too_deep" for _, rule in hits)


def test_a_raising_rule_fails_closed_with_a_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = corpus()[0].secret
    r = Redactor(env={})

    def boom(*args: object) -> str:
        raise RuntimeError("a rule broke")

    monkeypatch.setattr(r, "_text", boom)
    assert r.text(f"key {secret}") == FAILED
    out = r.value(json.dumps({"log": f"key {secret}"}))
    assert secret not in out and _valid_json(out)
    tables = {"step_records": [{"run_id": "r", "step": 1, "thought": f"key {secret}"}]}
    assert _row(redact_tables(tables, r)["step_records"])["thought"] == FAILED


def test_user_patterns_and_allow_list_from_a_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "redact.toml"
    config.write_text('allow = ["AKIAIOSFODNN7EXAMPLE"]\n\n[patterns]\nticket = "TICKET-[0-9]+"\n')
    monkeypatch.setenv("LOOPTRACE_REDACT_CONFIG", str(config))
    r = Redactor(env={})
    assert r.text("TICKET-42 uses AKIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPL2") == \
        "[REDACTED:ticket] uses AKIAIOSFODNN7EXAMPLE and [REDACTED:aws_access_key]"
    config.write_text('[patterns]\nbad = "("\n')
    with pytest.raises(ValueError, match="redact.toml: pattern 'bad'"):
        Redactor(env={})


@pytest.mark.parametrize(("key", "secret"), [
    ("password", True), ("dbPassword", True), ("DB_PASSWORD", True), ("db-password", True), ("X-Api-Key", True),
    ("secretAccessKey", True), ("authToken", True), ("pass", True), ("Proxy-Authorization", True),
    ("csrftoken", True), ("http.request.header.cookie", True), ("client_secret", True), ("sessionId", True),
    ("max_tokens", False), ("input_tokens", False), ("author", False), ("path", False), ("keyboard", False),
    ("gen_ai.usage.output_tokens", False), ("tokenizer", False), ("passage", False),
])
def test_key_names_are_normalised(key: str, secret: bool) -> None:
    out = Redactor(env={}).value({key: "v4lue-of-the-key"})
    assert (out[key] == "[REDACTED:secret_key]") is secret


def test_a_users_anchored_pattern_reaches_json_text_and_nesting_too_deep_to_walk() -> None:
    # A user's pattern is tried on each text as it is (``Redactor.text``), so ``^TK[0-9]{6}$``
    # matches a value "TK123456". The screens that decide whether a JSON text or a structure too deep
    # to walk needs a look tried it on the JSON text instead, where the anchors never match: the
    # value went to the store as it came.
    r = Redactor(env={}, extra_patterns={"ticket": r"^TK[0-9]{6}$"})
    assert r.value("TK123456") == "[REDACTED:ticket]"
    out = r.value(json.dumps({"ticket": "TK123456", "n": 1}))
    assert "TK123456" not in out and json.loads(out) == {"ticket": "[REDACTED:ticket]", "n": 1}
    nested: object = {"ticket": "TK123456"}
    for _ in range(300):
        nested = [nested]
    out = json.dumps(r.value(nested))
    assert "TK123456" not in out and TOO_DEEP in out
    deep_text = "[" * 10_000 + json.dumps("TK123456") + "]" * 10_000
    assert "TK123456" not in r.value(deep_text)
    clean: object = {"ticket": "not one"}
    for _ in range(300):
        clean = [clean]
    assert r.value(clean) == clean  # nothing of the user's matches: kept whole
