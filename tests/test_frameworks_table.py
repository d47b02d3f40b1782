"""The framework tables of tracer/ingest/otlp/frameworks.py, one test per entry, and the pure readers
behind steps from messages and conversations (spans built inline, no packages, no I/O)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from looptrace.tracer.ingest.otlp import frameworks as fw
from looptrace.tracer.ingest.otlp.conventions import rows_for_trace
from looptrace.tracer.ingest.otlp.conversations import group_conversations, is_loose_call
from looptrace.tracer.ingest.otlp.messages import declared_names, exchange_of, tool_calls_in, tool_results_in
from looptrace.tracer.records import pricing
from looptrace.tracer.records.spans import PlainSpan

# -- one test per table entry ----------------------------------------------------------------------------

ARGUMENTS = {
    "smolagents": ({"args": [], "sanitize_inputs_outputs": True, "kwargs": {"path": "a.txt"}}, {"path": "a.txt"}),
    "langgraph": ({"__type": "tool_call_with_context", "tool_call": {"name": "read_file", "args": {"path": "a.txt"},
                   "id": "call_1"}, "state": {}}, {"path": "a.txt"}),
}
RESULTS = {
    ("langgraph", frozenset({"messages"})): (
        {"messages": [{"type": "tool", "data": {"content": "contents of a.txt", "tool_call_id": "call_1"}}]},
        "contents of a.txt"),
    ("langchain", frozenset({"type", "data"})): ({"type": "tool", "data": {"content": "42"}}, "42"),
    ("langchain", frozenset({"content", "tool_call_id"})): ({"content": "42", "tool_call_id": "c", "name": "x"}, "42"),
}


def test_every_argument_wrapper_has_a_case() -> None:
    assert {w.framework for w in fw.ARGUMENT_WRAPPERS} == set(ARGUMENTS)


@pytest.mark.parametrize("framework", sorted(ARGUMENTS))
def test_argument_wrapper(framework: str) -> None:
    wrapped, inner = ARGUMENTS[framework]
    assert fw.unwrap(wrapped, fw.ARGUMENT_WRAPPERS) == inner
    assert fw.unwrap(inner, fw.ARGUMENT_WRAPPERS) == inner  # the model's JSON stays as it is


def test_every_result_wrapper_has_a_case() -> None:
    assert {(w.framework, w.keys) for w in fw.RESULT_WRAPPERS} == set(RESULTS)


def _entry_id(entry: tuple[str, frozenset[str]]) -> str:
    """The same on every interpreter (a frozenset's order follows string hashing, which differs per
    process, and pytest-xdist workers must collect the same ids)."""
    return f"{entry[0]}-{'+'.join(sorted(entry[1]))}"


@pytest.mark.parametrize("entry", sorted(RESULTS, key=_entry_id), ids=_entry_id)
def test_result_wrapper(entry: tuple[str, frozenset[str]]) -> None:
    wrapped, inner = RESULTS[entry]
    assert fw.unwrap(wrapped, fw.RESULT_WRAPPERS) == inner


@pytest.mark.parametrize("name", sorted(fw.FINAL_ANSWER_TOOLS))
def test_final_answer_tool(name: str) -> None:
    key = fw.FINAL_ANSWER_TOOLS[name]
    args = {key: "done"} if key else {"summary": "done"}
    assert fw.final_answer(name, args) == (True, "done" if key else args)
    assert fw.final_answer("read_file", args) == (False, None)


@pytest.mark.parametrize("name", sorted(fw.ENVELOPE_AGENTS))
def test_envelope(name: str) -> None:
    assert fw.is_envelope(name) and not fw.is_envelope("file_agent")


def test_graph_node() -> None:
    assert fw.is_graph_node({fw.GRAPH_NODE_KEY: "agent", "langgraph_step": 1})
    assert not fw.is_graph_node({"ls_integration": "langchain_chat_model"}) and not fw.is_graph_node(None)


EVIDENCE = {
    "smolagents": "Unknown tool delete_everything, should be one of: read_file, final_answer.",
    "smolagents-code": "InterpreterError: Forbidden function evaluation: 'delete_everything' is not among the "
                       "explicitly allowed tools or defined/imported in the preceding code",
    "openai-agents": "Tool 'delete_everything' not found.",
    "langgraph": "Error: delete_everything is not a valid tool, try one of [read_file].",
    "pydantic-ai": "Unknown tool name: 'delete_everything'. Available tools: 'read_file'",
    "any": "unknown tool: delete_everything",
}


def test_every_evidence_pattern_has_a_case() -> None:
    assert [f for f, _ in fw.UNKNOWN_TOOL_EVIDENCE] == list(EVIDENCE)


@pytest.mark.parametrize("framework", list(EVIDENCE))
def test_unknown_tool_evidence(framework: str) -> None:
    pattern = dict(fw.UNKNOWN_TOOL_EVIDENCE)[framework]
    match = pattern.search(EVIDENCE[framework])
    assert match is not None and match.group(1).strip("'\"") == "delete_everything"
    assert fw.is_unknown_tool(EVIDENCE[framework], "delete_everything")
    assert not fw.is_unknown_tool(EVIDENCE[framework], "read_file")  # names the other tool only as a choice


@pytest.mark.parametrize("framework,attribute,key", fw.DECLARED_TOOLS)
def test_declared_tools_source(framework: str, attribute: str, key: str) -> None:
    tools = [{"name": "read_file"}] if framework == "pydantic-ai" else [
        {"type": "function", "function": {"name": "read_file"}}]
    attributes = {attribute: json.dumps({key: tools})}
    assert exchange_of(attributes).declared == frozenset({"read_file"})


# -- messages in every shape -----------------------------------------------------------------------------


@pytest.mark.parametrize("message", [
    {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                          "function": {"name": "f", "arguments": '{"x": 1}'}}]},  # OpenAI
    {"role": "assistant", "tool_calls": [{"tool_call": {"id": "c1", "function": {"name": "f",
                                                                                 "arguments": '{"x": 1}'}}}]},  # OI
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {"x": 1}}]},  # GenAI
    {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"x": 1}}]},  # Anthropic
], ids=["openai", "openinference", "genai", "anthropic"])
def test_tool_calls_in_every_shape(message: dict[str, Any]) -> None:
    [call] = tool_calls_in([message])
    assert (call.id, call.name, json.loads(call.arguments or "null")) == ("c1", "f", {"x": 1})


@pytest.mark.parametrize("message", [
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "ok"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text",
                                                                                          "text": "ok"}]}]},
], ids=["openai", "genai", "anthropic"])
def test_tool_results_in_every_shape(message: dict[str, Any]) -> None:
    assert tool_results_in([message]) == {"c1": "ok"}


def test_declared_names() -> None:
    assert declared_names([{"tool": {"json_schema": json.dumps({"type": "function", "function": {"name": "a"}})}},
                           {"name": "b"}]) == frozenset({"a", "b"})
    assert declared_names(None) is None


# -- loose calls grouped into conversations --------------------------------------------------------------

TASK = {"role": "user", "content": "Read a.txt"}


def chat(trace: str, start: int, messages: list[Any], reply: dict[str, Any], *, service: str = "svc",
         tools: bool = True, **extra: Any) -> PlainSpan:
    request: dict[str, Any] = {"model": "gpt-4o-mini", "messages": messages}
    if tools:
        request["tools"] = [{"type": "function", "function": {"name": "read_file"}}]
    response = {"id": f"chatcmpl-{trace}", "choices": [{"message": reply}]}
    return PlainSpan(trace, f"{trace}00000000"[:16], None, "ChatCompletion", start_ns=start, end_ns=start + 1000,
                     attributes={"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini",
                                 "input.value": json.dumps(request), "output.value": json.dumps(response), **extra},
                     resource={"service.name": service})


def call(i: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def loop(prefix: str, start: int, *, service: str = "svc") -> list[list[PlainSpan]]:
    """A bare loop's three calls as three traces: read_file, the undeclared delete_everything, answer."""
    m1 = [TASK]
    m2 = [*m1, call(1, "read_file", {"path": "a.txt"}), {"role": "tool", "tool_call_id": "call_1", "content": "A"}]
    m3 = [*m2, call(2, "delete_everything", {}), {"role": "tool", "tool_call_id": "call_2", "content": "no such"}]
    replies = [call(1, "read_file", {"path": "a.txt"}), call(2, "delete_everything", {}),
               {"role": "assistant", "content": "done"}]
    return [[chat(f"{prefix}{i}", start + i * 10**9, m, r, service=service)]
            for i, (m, r) in enumerate(zip((m1, m2, m3), replies))]


def test_a_bare_loop_is_one_run_with_its_tools_and_the_undeclared_one() -> None:
    traces = loop("a", 0)
    assert all(is_loose_call(t) for t in traces)
    [group] = group_conversations(traces)
    rows = rows_for_trace(group, source="otlp")
    assert len(rows["run_records"]) == 1 and len(rows["step_records"]) == 3
    assert rows["run_records"][0]["answer"] == "done"
    tools = [(r["step"], r["tool"], r["args"], r["observation"], r["error_type"]) for r in rows["tool_call_records"]]
    assert tools == [(1, "read_file", '{"path": "a.txt"}', "A", None),
                     (2, "delete_everything", "{}", "no such", "tool_not_found")]


def test_two_loops_of_two_services_stay_apart_and_a_gap_splits_a_loop() -> None:
    traces = [*loop("a", 0, service="one"), *loop("b", 0, service="two")]
    assert sorted(len(g) for g in group_conversations(traces)) == [3, 3]
    late = loop("c", 0)
    assert len(group_conversations(late, window_ns=10**8)) == 3  # calls 1 s apart, a 0.1 s window


def test_a_conversation_id_groups_calls_whose_messages_do_not_chain() -> None:
    spans = [[chat(f"d{i}", i, [{"role": "user", "content": f"q{i}"}], {"role": "assistant", "content": "a"},
                   **{"gen_ai.conversation.id": "conv-1"})] for i in range(3)]
    assert len(group_conversations(spans)) == 1


def test_the_same_call_seen_twice_is_one_call() -> None:
    [first, *rest] = loop("e", 0)
    sdk = PlainSpan("f0", "f000000000000000", None, "anthropic.messages.create", start_ns=5, end_ns=900,
                    attributes={"gen_ai.operation.name": "chat", "gen_ai.response.id": "chatcmpl-e0",
                                "gen_ai.request.model": "gpt-4o-mini"}, resource={"service.name": "svc"})
    [group] = group_conversations([first, [sdk], *rest])
    rows = rows_for_trace(group, source="otlp")
    assert len(rows["llm_call_records"]) == 3 and len(rows["step_records"]) == 3
    assert len(rows["spans"]) == 4  # every span is kept, the call is counted once


def test_an_agent_trace_is_not_a_loose_call() -> None:
    agent = PlainSpan("g", "g000000000000000", None, "agent", attributes={"openinference.span.kind": "AGENT"})
    model = chat("g", 1, [TASK], {"role": "assistant", "content": "x"})
    model.parent_span_id = agent.span_id
    assert not is_loose_call([agent, model]) and is_loose_call([model])


# -- prices ---------------------------------------------------------------------------------------------


def test_prices_file(tmp_path: Path) -> None:
    good = tmp_path / "prices.json"
    good.write_text(json.dumps({"my-model": [1, 2, 1, 0.1]}))
    assert pricing.load_prices(good) == {"my-model": pricing.Price(1.0, 2.0, 1.0, 0.1)}
    assert pricing.price_of("my-model-v2") == pricing.Price(1.0, 2.0, 1.0, 0.1)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"x": [1, 2]}))
    with pytest.raises(ValueError, match="'x' needs four non-negative numbers"):
        pricing.load_prices(bad)
    pricing.PRICES.pop("my-model")


def test_an_unknown_model_has_no_cost() -> None:
    assert pricing.price_of("gpt-4o-mini-2024-07-18") == pricing.PRICES["gpt-4o-mini"]
    span = chat("h", 1, [TASK], {"role": "assistant", "content": "x"}, **{"llm.token_count.prompt": 10,
                                                                           "llm.model_name": "mystery-1"})
    [row] = rows_for_trace([span], source="otlp")["llm_call_records"]
    assert row["cost_usd"] is None and row["input_tokens"] == 10


# -- runs are agent invocations ----------------------------------------------------------------------------


def agent_span(span_id: str, parent: str | None, name: str, start: int, **attributes: Any) -> PlainSpan:
    return PlainSpan("t1", span_id, parent, name, start_ns=start, end_ns=start + 10**6,
                     attributes={"openinference.span.kind": "AGENT", **attributes})


def model_under(span_id: str, parent: str, start: int) -> PlainSpan:
    span = chat(span_id, start, [TASK, {"role": "user", "content": span_id}], {"role": "assistant", "content": "ok"})
    span.trace_id, span.span_id, span.parent_span_id = "t1", span_id, parent  # its own request and response
    return span


def test_an_envelope_and_graph_nodes_fold_into_the_agent_run() -> None:
    node = json.dumps({fw.GRAPH_NODE_KEY: "agent"})
    spans = [agent_span("e" * 16, None, "Agent workflow", 0),
             agent_span("a" * 16, "e" * 16, "file_agent", 1),
             agent_span("b" * 16, "a" * 16, "agent", 2, metadata=node), model_under("c" * 16, "b" * 16, 3),
             agent_span("d" * 16, "a" * 16, "agent", 5, metadata=node), model_under("f" * 16, "d" * 16, 6)]
    rows = rows_for_trace(spans, source="otlp")
    assert [(r["agent"], r["parent_run_id"]) for r in rows["run_records"]] == [("file_agent", None)]
    assert len(rows["step_records"]) == 2


def test_a_real_sub_agent_stays_a_child_run() -> None:
    spans = [agent_span("a" * 16, None, "planner", 0), model_under("c" * 16, "a" * 16, 1),
             agent_span("b" * 16, "a" * 16, "researcher", 2), model_under("d" * 16, "b" * 16, 3)]
    runs = {r["agent"]: r for r in rows_for_trace(spans, source="otlp")["run_records"]}
    assert set(runs) == {"planner", "researcher"}
    assert runs["researcher"]["parent_run_id"] == runs["planner"]["run_id"]
