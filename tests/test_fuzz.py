"""Fuzzing the two doors untrusted data comes in by: trajectory importers and the OTLP receiver.

Importers get documents shaped like each format they read, with random values, wrong types, missing
keys, deep nesting, huge strings, truncation and bytes that are not UTF-8; the property is that a file
is imported whole or skipped with a reason, never half, and that ``import_paths`` never raises. The
receiver gets random bodies, truncated protobuf, wrong content types, compression garbage and random
but well-formed spans; the property is a 4xx (or 200) answer, never a 5xx or a dropped connection,
and a valid request answered 200 right after. Examples are few (the file runs in seconds); the
strategies aim at the branches the parsers take, not at volume.
"""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import os
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from looptrace.tracer.ingest.files.formats import parse_file
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.ingest.files.trajectory import trajectory_rows
from looptrace.tracer.records import conventions as c
from looptrace.tracer.store import Store

from .conftest import query

FUZZ = settings(max_examples=20, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# -- values ---------------------------------------------------------------------------------------------

SPECIAL_TEXT = st.sampled_from([
    "", " ", "```bash\nls -la\n```", "```bash\nls\n```\n```bash\npwd\n```", "Unknown tool: frob",
    "Error: no such user", "exit_cost", "submitted", "submitted (exit_context)", "Submitted",
    "LimitsExceeded", "FormatError", "###STOP###", "<pr_description>fix it</pr_description>",
    "\ud800 lone surrogate",
    "\x1b]0;pwned\x07\x9b\u202e", "null", '{"command": "ls"}', "{not json", "transfer_to_human_agents",
    "The last command <command>x</command> timed out", "DISCUSSION\nthinking",
    "/bin/bash: line 1: foo: command not found",
])
TEXT = st.one_of(st.text(max_size=40), SPECIAL_TEXT)
HUGE = st.sampled_from([10_000, 300_000]).map(lambda n: "x" * n)
NUMBER = st.one_of(st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(0, 2_000_000_000))
JUNK: st.SearchStrategy[Any] = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBER, TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)


def maybe(right: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the right shape, sometimes anything at all (a wrong type)."""
    return st.one_of(right, right, right, JUNK)


def obj(fields: dict[str, st.SearchStrategy[Any]], required: tuple[str, ...] = ()
        ) -> st.SearchStrategy[dict[str, Any]]:
    """An object of mostly-right values: keys not ``required`` may be missing, and unknown keys appear."""
    optional = {k: v for k, v in fields.items() if k not in required}
    return st.builds(lambda known, extra: {**extra, **known},
                     st.fixed_dictionaries({k: fields[k] for k in required}, optional=optional).map(dict),
                     st.dictionaries(TEXT, JUNK, max_size=2))


CONTENT = st.one_of(TEXT, HUGE, st.lists(obj({"type": st.just("text"), "text": maybe(TEXT)}), max_size=3))
ROLE = st.sampled_from(["system", "user", "assistant", "tool", "function", "human", "bot"])
TOOL_CALL = obj({
    "id": maybe(TEXT), "type": st.just("function"),
    "function": maybe(obj({"name": maybe(st.sampled_from(["bash", "read", "get_user"])),
                           "arguments": maybe(st.one_of(TEXT, JUNK.map(json.dumps)))})),
})
USAGE = obj({"prompt_tokens": NUMBER, "completion_tokens": NUMBER})
MESSAGE = obj({
    "role": maybe(ROLE), "content": maybe(CONTENT), "name": maybe(TEXT),
    "tool_calls": maybe(st.lists(TOOL_CALL, max_size=3)), "tool_call_id": maybe(TEXT),
    "is_demo": st.booleans(),
    "extra": maybe(obj({"response": maybe(obj({"usage": maybe(USAGE), "created": NUMBER}))})),
}, required=("role",))
MESSAGES = st.lists(maybe(MESSAGE), max_size=8)
STATS = obj({"instance_cost": NUMBER, "tokens_sent": NUMBER, "tokens_received": NUMBER, "api_calls": NUMBER})
SWE_STEP = obj({"action": maybe(TEXT), "observation": maybe(CONTENT), "thought": maybe(TEXT),
                "response": maybe(TEXT), "messages": maybe(MESSAGES)})

SWE_AGENT = obj({
    "trajectory": maybe(st.lists(maybe(SWE_STEP), max_size=6)),
    "history": maybe(MESSAGES),
    "info": maybe(obj({"exit_status": maybe(SPECIAL_TEXT), "submission": maybe(TEXT),
                       "model_stats": maybe(STATS), "swe_agent_version": TEXT})),
    "replay_config": maybe(st.one_of(TEXT, JUNK.map(json.dumps),
                                     st.just('{"agent": {"model": {"name": "m"}}}'))),
}, required=("trajectory",))
MINI_SWE_AGENT = obj({
    "messages": maybe(MESSAGES), "trajectory_format": st.just("mini-swe-agent-1"), "instance_id": maybe(TEXT),
    "info": maybe(obj({"exit_status": maybe(SPECIAL_TEXT), "submission": maybe(TEXT),
                       "model_stats": maybe(STATS),
                       "config": maybe(obj({"model": maybe(obj({"model_name": maybe(TEXT)}))}))})),
}, required=("messages", "trajectory_format"))
EPISODE = obj({
    "traj": maybe(MESSAGES), "task_id": maybe(NUMBER), "trial": maybe(NUMBER), "reward": maybe(NUMBER),
    "info": maybe(obj({"source": maybe(TEXT), "task": maybe(obj({"instruction": maybe(TEXT)}))})),
}, required=("traj",))
OPENAI_CHAT = st.one_of(
    obj({"messages": maybe(MESSAGES), "tools": maybe(st.lists(maybe(TOOL_CALL), max_size=2)),
         "model": maybe(TEXT), "status": maybe(SPECIAL_TEXT), "error": maybe(TEXT)}, required=("messages",)),
    st.lists(maybe(EPISODE), min_size=1, max_size=3),
)
CHAT = st.one_of(
    MESSAGES,
    obj({"messages": maybe(MESSAGES), "model": maybe(TEXT), "status": maybe(TEXT)}, required=("messages",)),
    obj({"history": maybe(MESSAGES)}, required=("history",)),
)

AGENTCHAT_PART = obj({"id": maybe(TEXT), "name": maybe(TEXT), "arguments": maybe(st.one_of(TEXT, JUNK.map(json.dumps))),
                      "call_id": maybe(TEXT), "content": maybe(CONTENT), "is_error": maybe(st.booleans())})
AGENTCHAT_MESSAGE = obj({
    # source and type are what detection needs; everything else may be junk
    "source": st.sampled_from(["user", "MagenticOneOrchestrator", "Researcher"]),
    "type": st.one_of(TEXT, st.sampled_from(["TextMessage", "ToolCallRequestEvent", "ToolCallExecutionEvent", "ThoughtEvent",
                                   "StopMessage", "ToolCallSummaryMessage"])),
    "content": maybe(st.one_of(CONTENT, st.lists(maybe(AGENTCHAT_PART), max_size=3))),
    "models_usage": maybe(USAGE), "created_at": maybe(st.one_of(TEXT, st.just("2026-12-04T04:31:00.138294Z"))),
}, required=("source", "type"))
AGENTCHAT = obj({"messages": st.lists(AGENTCHAT_MESSAGE, min_size=1, max_size=8),
                 "stop_reason": maybe(TEXT), "error": maybe(TEXT)}, required=("messages", "stop_reason"))
CREWAI_ENTRY = obj({"timestamp": maybe(TEXT), "task_name": maybe(TEXT), "task": maybe(TEXT),
                    "agent": st.one_of(TEXT, st.sampled_from(["Researcher", "Writer"])),
                    "status": st.sampled_from(["started", "completed"]), "output": maybe(CONTENT)},
                   required=("timestamp", "agent", "status"))
CREWAI = st.lists(CREWAI_ENTRY, min_size=1, max_size=6)

FORMATS = {
    "swe-agent": (SWE_AGENT, [".traj", ".traj.gz", ".json"]),
    "mini-swe-agent": (MINI_SWE_AGENT, [".traj.json"]),
    "openai-chat": (OPENAI_CHAT, [".json", ".json.gz"]),
    "chat": (CHAT, [".json"]),
    "autogen-agentchat": (AGENTCHAT, [".json"]),
    "crewai": (CREWAI, [".json"]),
}

# -- importing ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def import_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("fuzz-import") / "store.duckdb")
    store.compact()
    return store


def damage(raw: bytes, how: str, at: float) -> bytes:
    cut = int(len(raw) * at)
    if how == "truncate":
        return raw[:cut]
    if how == "not-utf8":
        return raw[:cut] + b"\xff\xfe\xc0" + raw[cut:]
    return raw


def write_file(folder: Path, suffix: str, raw: bytes, gzip_cut: float | None = None) -> Path:
    path = folder / f"{uuid.uuid4().hex}{suffix}"
    if suffix.endswith(".gz"):
        raw = gzip.compress(raw)
        if gzip_cut is not None:
            raw = raw[: int(len(raw) * gzip_cut)]
    path.write_bytes(raw)
    return path


def expected_rows(path: Path) -> dict[str, dict[str, int]] | None:
    """Rows per table of each run a successful parse of ``path`` gives; None when parsing fails."""
    try:
        _, runs = parse_file(path)
    except Exception:  # noqa: BLE001 - import_paths skips such a file, whatever the error
        return None
    out: dict[str, dict[str, int]] = {}
    for t in runs:
        rows = trajectory_rows(t, imported_at=datetime(2026, 1, 1))
        out.setdefault(t.run_id, {table: len(r) for table, r in rows.items()})
    return out


def check_whole_or_skipped(store: Store, files: list[Path]) -> None:
    """``import_paths`` over ``files`` does not raise; each file is stored whole or skipped with a reason."""
    expected = {f.resolve(): expected_rows(f) for f in files}
    report = import_paths(store, files)
    skipped = {Path(p).resolve(): reason for p, reason in report.skipped}
    # Imports go through the sink as segments: absorbed, a plain read-only connection sees them all.
    if store.path.exists() or store.segments_dir.exists():
        store.compact()
    conn = duckdb.connect(str(store.path), read_only=True)
    try:
        for path, runs in expected.items():
            rows = conn.execute("SELECT count(*) FROM run_records WHERE source = ?", [str(path)]).fetchone()
            if path in skipped:
                assert skipped[path], "a skipped file has a reason"
                assert rows == (0,), f"{path.name} was skipped ({skipped[path]}) but left rows"
                continue
            assert runs is not None, f"{path.name} fails to parse but was not reported as skipped"
            for run_id, want in runs.items():
                count = "SELECT count(*) FROM {} WHERE run_id = ?"
                got = {t: conn.execute(count.format(t), [run_id]).fetchall()[0][0] for t in want}
                assert got == want, f"{path.name}: run {run_id} stored {got}, parsed {want}"
    finally:
        conn.close()


@pytest.mark.parametrize("fmt", list(FORMATS))
@FUZZ
@given(data=st.data())
def test_importers_store_a_file_whole_or_skip_it(
    import_store: Store, tmp_path_factory: pytest.TempPathFactory, fmt: str, data: st.DataObject
) -> None:
    strategy, suffixes = FORMATS[fmt]
    folder = tmp_path_factory.mktemp(f"fuzz-{fmt}")
    files = []
    for _ in range(data.draw(st.integers(1, 3), label="files")):
        raw = json.dumps(data.draw(strategy, label="document")).encode("utf-8", "surrogatepass")
        how = data.draw(st.sampled_from(["none", "none", "truncate", "not-utf8"]), label="damage")
        raw = damage(raw, how, data.draw(st.floats(0, 1), label="at"))
        suffix = data.draw(st.sampled_from(suffixes), label="suffix")
        files.append(write_file(folder, suffix, raw, data.draw(st.one_of(st.none(), st.floats(0.1, 0.95)))))
    check_whole_or_skipped(import_store, files)



def test_an_agent_named_with_a_lone_surrogate_is_imported_whole(tmp_path: Path) -> None:
    """The fuzz test's find (issue 39), pinned: a CrewAI agent named with a lone surrogate gets a sub-run
    whose id hashes that name; the file was skipped with an encoding error as its reason."""
    log = [{"timestamp": "2026-01-01 00:00:00", "task_name": "t", "task": "t", "agent": agent, "status": status,
            "output": "done"} for agent in ("Researcher \ud800", "Writer") for status in ("started", "completed")]
    path = tmp_path / "crew.json"
    path.write_bytes(json.dumps(log).encode("utf-8", "surrogatepass"))
    store = Store(tmp_path / "store.duckdb")
    report = import_paths(store, [path])
    assert report.skipped == [] and report.runs_imported == 3  # the crew's run and one per agent
    # Stored names are valid text (U+FFFD for the surrogate); the crew's run is named for its first agent.
    agents = query(store.path, "SELECT agent, parent_run_id IS NULL FROM runs ORDER BY ALL")
    assert agents == [("Researcher \ufffd", False), ("Researcher \ufffd", True), ("Writer", False)]
    assert query(store.path, "SELECT count(DISTINCT run_id) FROM runs") == [(3,)]


NESTED = {
    "document": "{nested}",
    "content": '{{"messages": [{{"role": "user", "content": "go"}}, '
               '{{"role": "assistant", "content": {nested}}}]}}',
    "args": '{{"messages": [{{"role": "assistant", "tool_calls": [{{"id": "1", "function": {{"name": "bash", '
            '"arguments": {quoted}}}}}]}}, {{"role": "tool", "content": "ok"}}]}}',
}


@FUZZ
@given(depth=st.sampled_from([50, 900, 1500, 20_000, 200_000]), where=st.sampled_from(list(NESTED)),
       suffix=st.sampled_from([".json", ".traj", ".traj.json"]))
def test_importers_survive_deep_nesting(
    import_store: Store, tmp_path_factory: pytest.TempPathFactory, depth: int, where: str, suffix: str
) -> None:
    nested = "[" * depth + "]" * depth
    text = NESTED[where].format(nested=nested, quoted=json.dumps(nested))
    folder = tmp_path_factory.mktemp("fuzz-deep")
    check_whole_or_skipped(import_store, [write_file(folder, suffix, text.encode())])


# -- the OTLP receiver ----------------------------------------------------------------------------------

PROTOBUF, JSON_MEDIA = "application/x-protobuf", "application/json"
KEYS = [
    "gen_ai.provider.name", "gen_ai.system", c.GEN_AI_REQUEST_MODEL, c.GEN_AI_RESPONSE_MODEL,
    "llm.model_name", "llm.provider", "llm.system", "llm.request.model_name", "llm.response.model",
    "llm.response.model_name",
    c.RUN_ID, c.GEN_AI_OPERATION, c.GEN_AI_AGENT_NAME, c.GEN_AI_RESPONSE_FINISH_REASONS,
    c.GEN_AI_USAGE_INPUT_TOKENS, c.GEN_AI_USAGE_OUTPUT_TOKENS, c.GEN_AI_USAGE_CACHE_READ,
    c.GEN_AI_USAGE_CACHE_CREATION, c.GEN_AI_TOOL_NAME, c.GEN_AI_TOOL_CALL_ID, c.GEN_AI_TOOL_CALL_ARGUMENTS,
    c.GEN_AI_TOOL_CALL_RESULT, c.ERROR_TYPE, c.RUN_PARENT_ID, c.RUN_STATUS, c.RUN_TASK, c.STEP_INDEX,
    c.TOOL_CALL_INDEX, c.LLM_MESSAGES_APPEND, c.LLM_MESSAGES_KEEP, c.LLM_RESPONSE, c.LLM_COST,
    "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.prompt", "gen_ai.completion", "gen_ai.usage.prompt_tokens", "openinference.span.kind",
    "llm.input_messages", "llm.output_messages", "llm.token_count.prompt", "llm.token_count.completion",
    "llm.invocation_parameters", "llm.finish_reason", "input.value", "output.value", "tool.name",
    "tool_call.id",
    "traceloop.span.kind", "traceloop.entity.name", "traceloop.entity.input", "traceloop.entity.output",
    "traceloop.workflow.name", "llm.request.type", "agent.name", "exception.type", "exception.message",
]
ATTR_TEXT = st.one_of(TEXT, st.sampled_from([
    "chat", "invoke_agent", "execute_tool", "AGENT", "LLM", "TOOL", "CHAIN", "agent", "workflow", "task",
    "tool",
    "claude-sonnet-4-5", '[{"role": "user", "content": "hi"}]', '{"messages": [{"role": 5}]}', "[1, 2",
    '[{"role": "assistant", "parts": [{"type": "text", "content": 1}]}]', "[[[[[[]]]]]]",
    '{"input": {"value": null}}', "NaN", "-1", "1e400",
]), JUNK.map(json.dumps)).map(lambda v: v.encode("utf-8", "replace").decode("utf-8"))


def proto() -> tuple[Any, Any, Any, Any]:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
    from opentelemetry.proto.common.v1 import common_pb2
    from opentelemetry.proto.resource.v1 import resource_pb2
    from opentelemetry.proto.trace.v1 import trace_pb2

    return trace_service_pb2, trace_pb2, common_pb2, resource_pb2


def one_request(spans: list[Any], resource: list[Any] | None = None) -> Any:
    service, trace, _, res = proto()
    return service.ExportTraceServiceRequest(resource_spans=[trace.ResourceSpans(
        resource=res.Resource(attributes=resource or []), scope_spans=[trace.ScopeSpans(spans=spans)])])


def valid_body() -> bytes:
    _, trace, _, _ = proto()
    span = trace.Span(trace_id=os.urandom(16), span_id=os.urandom(8), name="chat valid",
                      start_time_unix_nano=10 ** 18, end_time_unix_nano=10 ** 18 + 1000)
    return one_request([span]).SerializeToString()


def start_receiver(db: Path) -> Any:
    module = pytest.importorskip("looptrace.tracer.ingest.otlp.receiver")
    # settle=0 and idle_timeout=0: every trace is mapped and written within the request that brings it, so a
    # mapping or write error shows up as that request's answer rather than in the background flusher.
    return module.OtlpReceiver(db, port=0, settle=0.0, idle_timeout=0.0).start()


@pytest.fixture(scope="module")
def receiver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    db = tmp_path_factory.mktemp("fuzz-otlp") / "store.duckdb"
    rec = start_receiver(db)
    yield rec
    rec.stop()
    assert query(db, "SELECT count(*) > 0 FROM spans") == [(True,)], "the valid requests were stored"


def send(rec: Any, body: bytes, headers: dict[str, str], *, method: str = "POST", path: str = "/v1/traces",
         conn: http.client.HTTPConnection | None = None) -> int:
    """The status the receiver answered; raises if it dropped the connection without answering."""
    conn = conn or http.client.HTTPConnection("127.0.0.1", rec.port, timeout=10)
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    response.read()
    return response.status


def assert_still_answers(rec: Any, conn: http.client.HTTPConnection | None = None) -> None:
    assert send(rec, valid_body(), {"content-type": PROTOBUF}, conn=conn) == 200


def refused_or_ok(status: int) -> bool:
    return status == 200 or 400 <= status < 500


@FUZZ
@given(body=st.one_of(st.binary(max_size=2000), st.binary(max_size=40).map(lambda b: b"\n\xff\xff\xff" + b)),
       media=st.sampled_from([PROTOBUF, JSON_MEDIA, "application/json; charset=utf-8"]),
       encoding=st.sampled_from([None, "gzip", "deflate", "identity"]))
def test_receiver_random_bodies_get_a_4xx(
    receiver: Any, body: bytes, media: str, encoding: str | None
) -> None:
    headers = {"content-type": media, **({"content-encoding": encoding} if encoding else {})}
    status = send(receiver, body, headers)
    assert refused_or_ok(status), status  # random bytes can be a valid (empty) protobuf message
    assert_still_answers(receiver)


@FUZZ
@given(at=st.floats(0.05, 0.95), compress=st.booleans(), spans=st.integers(1, 5))
def test_receiver_truncated_bodies_get_a_4xx(receiver: Any, at: float, compress: bool, spans: int) -> None:
    body = b"".join(valid_body() for _ in range(spans))  # concatenated messages merge into one valid request
    if compress:
        body = gzip.compress(body)
    cut = body[: max(1, int(len(body) * at))]
    headers = {"content-type": PROTOBUF, **({"content-encoding": "gzip"} if compress else {})}
    status = send(receiver, cut, headers)
    assert refused_or_ok(status), status  # a cut on a field boundary is a valid, shorter request
    if compress:
        assert status == 400
    assert_still_answers(receiver)


@FUZZ
@given(content_type=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=40),
       encoding=st.sampled_from([None, "br", "zstd", "gzip, gzip", "x"]))
def test_receiver_wrong_content_types_get_415(receiver: Any, content_type: str, encoding: str | None) -> None:
    if content_type.split(";")[0].strip().lower() in (PROTOBUF, JSON_MEDIA, "application/protobuf"):
        content_type = "text/plain"
    headers = {"content-type": content_type, **({"content-encoding": encoding} if encoding else {})}
    assert send(receiver, valid_body(), headers) == 415
    assert_still_answers(receiver)


@pytest.mark.parametrize("method, path, media", [
    pytest.param("POST", "/v1/traces", "application/x-protobuf", id="400-malformed-body"),
    pytest.param("POST", "/v1/traces", "text/plain", id="415-content-type"),
    pytest.param("POST", "/v1/logs", "application/x-protobuf", id="404-path"),
    pytest.param("PUT", "/v1/traces", "application/x-protobuf", id="405-method"),
])
def test_receiver_keeps_a_keep_alive_connection_usable_after_a_refusal(
    receiver: Any, method: str, path: str, media: str
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=10)
    status = send(receiver, b"\xff" * 64, {"content-type": media}, method=method, path=path, conn=conn)
    assert 400 <= status < 500
    # OTLP exporters reuse one connection: the body of a refused request must not be read as the next
    # request (it was, before the receiver drained it: the next, valid export got a 501).
    assert_still_answers(receiver, conn)


def any_value(common: Any) -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        ATTR_TEXT.map(lambda v: common.AnyValue(string_value=v)),
        st.booleans().map(lambda v: common.AnyValue(bool_value=v)),
        st.integers(-(2 ** 63), 2 ** 63 - 1).map(lambda v: common.AnyValue(int_value=v)),
        st.floats(allow_nan=True, allow_infinity=True).map(lambda v: common.AnyValue(double_value=v)),
        st.binary(max_size=12).map(lambda v: common.AnyValue(bytes_value=v)),
        st.just(common.AnyValue()),
    )

    def nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        pairs = st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=3)
        return st.one_of(
            st.lists(inner, max_size=3).map(
                lambda vs: common.AnyValue(array_value=common.ArrayValue(values=vs))),
            pairs.map(lambda kvs: common.AnyValue(kvlist_value=common.KeyValueList(
                values=[common.KeyValue(key=k, value=v) for k, v in kvs]))),
        )

    return st.recursive(leaf, nest, max_leaves=6)


@st.composite
def requests(draw: st.DrawFn) -> Any:
    """A well-formed request of random spans: attributes of every convention holding values of any type,
    random tree shapes (orphans, repeated ids, foreign parents), random times, kinds and status codes."""
    _, trace, common, _ = proto()
    key = st.one_of(st.sampled_from(KEYS), TEXT.map(lambda k: k.encode("utf-8", "replace").decode("utf-8")))
    attributes = st.lists(st.tuples(key, any_value(common)), max_size=8).map(
        lambda kvs: [common.KeyValue(key=k, value=v) for k, v in kvs])
    trace_id = os.urandom(16)
    ids = [os.urandom(8) for _ in range(draw(st.integers(1, 5)))]
    times = st.one_of(st.just(0), st.integers(0, 2 ** 64 - 1), st.integers(10 ** 18, 10 ** 18 + 10 ** 10))
    names = st.one_of(st.sampled_from(["chat m", "execute_tool t", "invoke_agent a", "agent.run"]), ATTR_TEXT)
    parents = st.one_of(st.just(b""), st.sampled_from(ids), st.binary(min_size=8, max_size=8))
    spans = []
    for _ in range(draw(st.integers(1, 8))):
        spans.append(trace.Span(
            trace_id=trace_id, span_id=draw(st.sampled_from(ids)), parent_span_id=draw(parents),
            name=draw(names), kind=draw(st.integers(0, 7)), start_time_unix_nano=draw(times),
            end_time_unix_nano=draw(times), attributes=draw(attributes),
            events=[trace.Span.Event(time_unix_nano=draw(times), name="e", attributes=draw(attributes))
                    for _ in range(draw(st.integers(0, 2)))],
            status=trace.Status(code=draw(st.integers(0, 3)), message=draw(ATTR_TEXT)),
        ))
    service_name = common.KeyValue(key="service.name", value=common.AnyValue(string_value="fuzz"))
    return one_request(spans, [service_name, *draw(attributes)])


def as_otlp_json(request: Any) -> bytes:
    """OTLP/JSON: protobuf's JSON mapping, except that trace and span ids are hex."""
    from google.protobuf import json_format

    def hex_ids(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("traceId", "spanId", "parentSpanId"):
                if isinstance(node.get(key), str):
                    node[key] = base64.b64decode(node[key]).hex()
            for v in node.values():
                hex_ids(v)
        elif isinstance(node, list):
            for v in node:
                hex_ids(v)

    doc = json_format.MessageToDict(request)
    hex_ids(doc)
    return json.dumps(doc).encode()


@FUZZ
@given(request=requests(), media=st.sampled_from([PROTOBUF, JSON_MEDIA]))
def test_receiver_random_spans_are_stored_or_refused_never_a_5xx(
    receiver: Any, request: Any, media: str
) -> None:
    body = request.SerializeToString() if media == PROTOBUF else as_otlp_json(request)
    status = send(receiver, body, {"content-type": media})
    assert refused_or_ok(status), status
    assert_still_answers(receiver)


@pytest.mark.parametrize("attributes", [
    pytest.param({c.GEN_AI_OPERATION: ["chat"]}, id="operation-is-a-list"),
    pytest.param({c.GEN_AI_OPERATION: "chat", c.GEN_AI_REQUEST_MODEL: {"name": "m"}}, id="model-is-a-map"),
    pytest.param({"openinference.span.kind": "LLM", "llm.provider": 7}, id="provider-is-a-number"),
    pytest.param({c.RUN_ID: 42}, id="looptrace-run-id-is-a-number"),
])
def test_receiver_survives_attributes_of_the_wrong_type(tmp_path: Path, attributes: dict[str, Any]) -> None:
    """Found by the fuzzing above while the receiver was written: an operation name that is a list broke
    the mapping, and a model, provider or run id that is not a string broke the segment write, after which
    the trace was put back and retried forever (503s) and the valid traces batched with it were lost."""
    _, trace, common, _ = proto()

    def value(v: Any) -> Any:
        if isinstance(v, list):
            return common.AnyValue(array_value=common.ArrayValue(values=[value(x) for x in v]))
        if isinstance(v, dict):
            return common.AnyValue(kvlist_value=common.KeyValueList(
                values=[common.KeyValue(key=k, value=value(x)) for k, x in v.items()]))
        return common.AnyValue(int_value=v) if isinstance(v, int) else common.AnyValue(string_value=v)

    span = trace.Span(trace_id=os.urandom(16), span_id=os.urandom(8), name="chat m",
                      start_time_unix_nano=10 ** 18, end_time_unix_nano=10 ** 18 + 5,
                      attributes=[common.KeyValue(key=k, value=value(v)) for k, v in attributes.items()])
    db = tmp_path / "store.duckdb"
    rec = start_receiver(db)
    try:
        status = send(rec, one_request([span]).SerializeToString(), {"content-type": PROTOBUF})
        assert refused_or_ok(status), status
        for _ in range(3):
            assert_still_answers(rec)
    finally:
        rec.stop()
    assert query(db, "SELECT count(*) FROM spans WHERE name = 'chat valid'") == [(3,)]
