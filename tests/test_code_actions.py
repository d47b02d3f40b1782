"""Code actions, failed calls and the GenAI spellings in the wild, on the real packages.

The slow tests run real agents (tests/codeact_agent.py, tests/framework_agent.py) against a scripted Chat
Completions server on 127.0.0.1 and store their spans through ``looptrace collect``'s receiver (live,
OTLP/HTTP) or ``looptrace import`` (an exported span tree, OTLP JSON):

- a smolagents ``CodeAgent`` whose code calls a managed ``ToolCallingAgent``, a tool with a positional
  argument, then ``final_answer("...")``: every manager step has its calls with arguments and
  observations, the sub-run links to the manager, and the sub-agent's three failed reads of a missing
  file are three calls with one action key and the error as their observation;
- the same small task (two reads, then the answer) on seven agents: openai-agents, LangGraph, smolagents'
  ToolCallingAgent and CodeAgent and pydantic-ai under their usual instrumentation, and any-agent's
  TinyAgent and LangChain agent under any-agent's own tracing, which writes ``gen_ai.tool.args`` and
  ``gen_ai.output``.

On each, the analyzer's verdicts (the rules of the verdicts branch, merged): the runs end ok on their end
tool or final answer, and a recovered loop is a secondary stagnation finding.

The fast tests build spans inline for what no installed writer produces (a span carrying both spellings,
recorded costs, the same code three times).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.replay.analyzer import analyze_store
from looptrace.tracer.cli import main as cli
from looptrace.tracer.ingest.otlp import frameworks as fw
from looptrace.tracer.ingest.otlp.code_actions import CodeCall, calls_in, code_of
from looptrace.tracer.ingest.otlp.conventions import rows_for_trace
from looptrace.tracer.ingest.otlp.receiver import OtlpReceiver
from looptrace.tracer.records.actions import call_key
from looptrace.tracer.records.spans import PlainSpan
from looptrace.tracer.store import Store

from .codeact_agent import ANSWER, MANAGED_TASK, NOTES, loop_script, managed_script, small_script, unknown_script
from .conftest import ROOT, python_env, query
from .test_frameworks import ONE_IS_ENOUGH

MISSING_ERROR = "FileNotFoundError: No such file: missing.txt"


def _run(module: str, client: str, script: Callable[[dict[str, Any]], dict[str, Any]], db: Path,
         mode: str, tmp: Path) -> None:
    """Run ``client`` of ``module`` against the scripted model; store its spans in ``db``, live over OTLP
    or by importing the span tree it exported."""
    with ChatCompletionsServer(script) as chat:
        if mode == "live":
            with OtlpReceiver(db, port=0, settle=0) as receiver:
                done = subprocess.run([sys.executable, "-m", module, client, chat.base_url, receiver.url],
                                      cwd=ROOT, env=python_env(), capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, done.stderr[-4000:]
                receiver.flush()
            return
        out = tmp / "export"
        done = subprocess.run([sys.executable, "-m", module, client, chat.base_url, "--export", str(out)],
                              cwd=ROOT, env=python_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
    assert cli(["import", str(out / ("tree.json" if mode == "span-tree" else "otlp.json")), "--db", str(db)]) == 0


def _calls(db: Path, run_id: str) -> list[tuple[Any, ...]]:
    rows = query(db, "SELECT step, tool, CAST(args AS VARCHAR), observation, is_error, action_key FROM tool_calls "
                     "WHERE run_id = ? ORDER BY step, call_index", [run_id])
    return [(step, tool, json.loads(args) if args is not None else None, obs, err, key)
            for step, tool, args, obs, err, key in rows]


def _verdicts(db: Path) -> dict[str, list[tuple[str, bool, int | None, int | None]]]:
    """The analyzer's diagnoses of each run: (label, primary, first step, last step), the primary first."""
    return {r.run_id: [(d.label, d.is_primary, d.first_step, d.last_step) for d in r.diagnoses]
            for r in analyze_store(Store(db), write=False)}


# -- a CodeAgent with a managed agent ------------------------------------------------------------------


# Every manager step is an action: its code's calls, with the arguments the code passed (positional ones
# under the tool's parameter names) and what came back (the managed agent's run: its answer). A
# ToolCallingAgent manager calls the managed agent from its message.
MANAGER_CALLS = {
    "smolagents-managed": [(1, "file_agent", {"task": MANAGED_TASK}, NOTES, False),
                           (2, "word_count", {"text": NOTES}, "4", False),
                           (3, "final_answer", {"answer": NOTES}, NOTES, False)],
    "smolagents-tool-manager": [(1, "file_agent", {"task": MANAGED_TASK}, NOTES, False),
                                (2, "final_answer", {"answer": NOTES}, NOTES, False)],
}


@pytest.mark.slow
@pytest.mark.parametrize("client,mode", [("smolagents-managed", "live"), ("smolagents-managed", "span-tree"),
                                         ("smolagents-tool-manager", "span-tree")])
def test_managed_agent(client: str, mode: str, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    _run("tests.codeact_agent", client, managed_script, db, mode, tmp_path)
    runs = query(db, "SELECT run_id, parent_run_id, answer, n_steps, agent FROM runs "
                     "ORDER BY parent_run_id NULLS FIRST")
    assert len(runs) == 2, runs
    (manager, no_parent, answer, n_manager, _), (sub, parent, sub_answer, _, sub_agent) = runs
    assert (no_parent, parent, sub_agent) == (None, manager, "file_agent")  # the sub-run links to the manager
    assert (answer, sub_answer) == (NOTES, NOTES)
    assert [c[:5] for c in _calls(db, manager)] == MANAGER_CALLS[client]
    if client == "smolagents-managed":
        assert n_manager == 3
        thoughts = query(db, "SELECT step, thought FROM steps WHERE run_id = ? ORDER BY step", [manager])
        assert all("<code>" in t for _, t in thoughts), thoughts  # the code itself, as the model wrote it
    # The recovered loop: three identical failing calls, one action key, the error as their observation.
    calls = _calls(db, sub)
    failing = calls[:3]
    assert [c[:5] for c in failing] == [(s, "read_file", {"path": "missing.txt"}, MISSING_ERROR, True) for s in (1, 2, 3)]
    assert len({c[5] for c in failing}) == 1 and failing[0][5] == call_key("read_file", {"path": "missing.txt"})
    assert calls[3:] and calls[3][:5] == (4, "read_file", {"path": "notes.txt"}, NOTES, False)
    assert [c[:3] for c in calls[4:]] == [(5, "final_answer", {"answer": NOTES})]  # the sub-agent's end tool
    # The analyzer's verdicts (the verdicts branch): both end ok on their end tool; the sub-agent's three
    # identical failing calls are a stagnation finding on steps 1-3, secondary since it recovered.
    verdicts = _verdicts(db)
    assert [v[:2] for v in verdicts[manager]] == [("ok", True)]
    assert [v[:2] for v in verdicts[sub]][0] == ("ok", True) and ("stagnation", False, 1, 3) in verdicts[sub]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["live", "span-tree"])
def test_code_agent_repeating_failing_code(mode: str, tmp_path: Path) -> None:
    """Code that called nothing is the interpreter's call; the same failing code three times is three calls
    of one action with the error (and its type, from the span's exception event) as what came back."""
    db = tmp_path / "store.duckdb"
    _run("tests.codeact_agent", "smolagents-code-loop", loop_script, db, mode, tmp_path)
    [(run_id, answer)] = query(db, "SELECT run_id, answer FROM runs")
    rows = query(db, "SELECT step, tool, CAST(args AS VARCHAR), observation, error_type, action_key FROM tool_calls "
                     "WHERE run_id = ? ORDER BY step, call_index", [run_id])
    assert answer == NOTES
    assert [(s, t, json.loads(a)) for s, t, a, *_ in rows] == [
        (1, fw.CODE_TOOL, {"code": 'print("looking")'}),
        *((s, "read_file", {"path": "missing.txt"}) for s in (2, 3, 4)),
        (5, "read_file", {"path": "notes.txt"}), (6, "final_answer", {"answer": NOTES})]
    assert rows[0][3].startswith("Execution logs:\nlooking")  # what running the code printed
    assert {(obs, err, key) for *_, obs, err, key in rows[1:4]} == {
        (MISSING_ERROR, "FileNotFoundError", call_key("read_file", {"path": "missing.txt"}))}
    verdicts = _verdicts(db)[run_id]
    assert verdicts[0][:2] == ("ok", True) and ("stagnation", False, 2, 4) in verdicts


@pytest.mark.slow
def test_code_calling_a_tool_the_agent_lacks(tmp_path: Path) -> None:
    """The framework refuses the call in the code: it is a call of that tool, tool_not_found, which the
    analyzer's hallucinated_tool rule reads (with thresholds that count one, as tests/test_frameworks.py)."""
    db = tmp_path / "store.duckdb"
    _run("tests.codeact_agent", "smolagents-code-unknown", unknown_script, db, "live", tmp_path)
    [(run_id,)] = query(db, "SELECT run_id FROM runs")
    [(step, tool, args, obs, err)] = query(db, "SELECT step, tool, CAST(args AS VARCHAR), observation, error_type "
                                               "FROM tool_calls WHERE tool <> 'final_answer'")
    assert (step, tool, json.loads(args), err) == (1, "delete_everything", {"force": True}, "tool_not_found")
    assert "Forbidden function evaluation: 'delete_everything'" in obs
    [result] = analyze_store(Store(db), thresholds=ONE_IS_ENOUGH, write=False)
    assert "hallucinated_tool" in {d.label for d in result.diagnoses}


# -- the same small task on seven agents ---------------------------------------------------------------

SMALL = [
    ("tests.framework_agent", "openai-agents+openinference"),
    ("tests.framework_agent", "langgraph+openinference"),
    ("tests.framework_agent", "smolagents+openinference"),
    ("tests.framework_agent", "pydantic-ai"),
    ("tests.codeact_agent", "smolagents-code"),
    ("tests.codeact_agent", "any-agent-tinyagent"),
    ("tests.codeact_agent", "any-agent-langchain"),
]


@pytest.mark.slow
@pytest.mark.parametrize("module,client", SMALL, ids=[c for _, c in SMALL])
def test_small_task_on_seven_agents(module: str, client: str, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    mode = "otlp-json" if module == "tests.codeact_agent" else "live"
    _run(module, client, small_script, db, mode, tmp_path)
    [(run_id, status, answer)] = query(db, "SELECT run_id, status, answer FROM runs")
    assert (status, answer) == ("ok", ANSWER)
    assert [v[:2] for v in _verdicts(db)[run_id]] == [("ok", True)]  # ended normally, nothing else found
    calls = [c[1:5] for c in _calls(db, run_id) if c[1] != "final_answer"]  # a CodeAgent keeps it as a call
    assert calls == [("read_file", {"path": "a.txt"}, "contents of a.txt", False),
                     ("read_file", {"path": "b.txt"}, "contents of b.txt", False)]


# -- pure readers, spans built inline ------------------------------------------------------------------


def test_code_blocks_and_the_calls_in_them() -> None:
    assert code_of("Thought: x\n<code>\nprint(1)\n</code>") == "print(1)"
    assert code_of("```py\na = 1\n```\nthen\n```python\nb = 2\n```") == "a = 1\n\nb = 2"
    assert code_of("no code here") is None and code_of(None) is None
    code = 'r = agent(task="x")\nfinal_answer(r, 2)\nt = tool("a", k=[1, 2])'
    assert calls_in(code) == [CodeCall("agent", (), {"task": "x"}), CodeCall("final_answer", ("r", 2), {}),
                              CodeCall("tool", ("a",), {"k": [1, 2]})]
    assert calls_in("def (") == []


CODE = {"smolagents": "<code>\nprint(1)\n</code>", "markdown": "```python\nprint(1)\n```",
        "codeact": "<execute>\nprint(1)\n</execute>"}


@pytest.mark.parametrize("kind", [k for k, _ in fw.CODE_BLOCKS])
def test_code_block_kind(kind: str) -> None:
    assert code_of(f"Thought: go.\n{CODE[kind]}\nmore words") == "print(1)"


@pytest.mark.parametrize("framework", [f for f, _ in fw.AGENT_RUN_SPANS])
def test_agent_run_span_name(framework: str) -> None:
    assert fw.agent_called("file_agent.run", {}, ("gen_ai.agent.name",)) == "file_agent"
    assert fw.agent_called("file_agent.run", {"gen_ai.agent.name": "reader"}, ("gen_ai.agent.name",)) == "reader"


@pytest.mark.parametrize("span_name", sorted(fw.FINAL_ANSWER_SPANS))
def test_final_answer_span(span_name: str) -> None:
    spans = [_span("a0", 0, AGENT, parent=None), _span("m1", 1, _chat("<code>\nfinal_answer(1)\n</code>")),
             _span("t1", 2, {"openinference.span.kind": "TOOL", "output.value": "42"}, name=span_name)]
    rows = rows_for_trace(spans, source="otlp")
    assert rows["tool_call_records"][0]["tool"] == fw.FINAL_ANSWER_SPANS[span_name]
    assert rows["run_records"][0]["answer"] == "42"  # no argument recorded: what the tool returned


def test_positional_arguments_keep_their_names() -> None:
    wrapped = {"args": ["done"], "sanitize_inputs_outputs": False, "kwargs": {}}
    assert fw.unwrap(wrapped, fw.ARGUMENT_WRAPPERS, ["answer"]) == {"answer": "done"}
    assert fw.unwrap(wrapped, fw.ARGUMENT_WRAPPERS) == {"args": ["done"]}  # names unknown: kept in order
    both = {"args": ["a", "b"], "sanitize_inputs_outputs": False, "kwargs": {"c": 1}}
    assert fw.unwrap(both, fw.ARGUMENT_WRAPPERS, ["x"]) == {"x": "a", "args": ["b"], "c": 1}


def _span(sid: str, start: int, attributes: dict[str, Any], *, parent: str | None = "a0", name: str = "s",
          status: str = "OK", events: list[dict[str, Any]] | None = None) -> PlainSpan:
    return PlainSpan(trace_id="t" * 32, span_id=sid, parent_span_id=parent, name=name, start_ns=start * 1000,
                     end_ns=start * 1000 + 500, status_code=status, attributes=attributes, events=events or [])


AGENT = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "a"}


def _chat(text: str | None = None, calls: list[dict[str, Any]] | None = None, **more: Any) -> dict[str, Any]:
    output = json.dumps(calls) if calls is not None else text
    return {"gen_ai.operation.name": "call_llm", "gen_ai.output": output,
            "gen_ai.output.type": "json" if calls is not None else "text", **more}


def test_the_conventions_name_wins_over_the_other_spelling_and_costs_are_kept() -> None:
    spans = [
        _span("a0", 0, AGENT, parent=None),
        _span("m1", 1, _chat(calls=[{"tool.name": "read_file", "tool.args": {"path": "a.txt"}}],
                             **{"gen_ai.usage.input_cost": 0.25, "gen_ai.usage.output_cost": 0.5})),
        _span("t1", 2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                        "gen_ai.tool.args": '{"path": "wrong"}', "gen_ai.tool.call.arguments": '{"path": "a.txt"}',
                        "gen_ai.output": "other", "gen_ai.tool.call.result": "contents of a.txt"}),
        _span("m2", 3, _chat("all read")),
    ]
    rows = rows_for_trace(spans, source="otlp")
    [call] = rows["tool_call_records"]
    assert (call["tool"], json.loads(call["args"]), call["observation"]) == ("read_file", {"path": "a.txt"},
                                                                            "contents of a.txt")
    assert [r["cost_usd"] for r in rows["llm_call_records"]] == [0.75, None]
    assert rows["run_records"][0]["answer"] == "all read"


def test_a_failed_calls_error_is_its_observation() -> None:
    error = [{"name": "exception", "attributes": {"exception.type": "FileNotFoundError",
                                                  "exception.message": "No such file: x"}}]
    spans = [
        _span("a0", 0, AGENT, parent=None),
        _span("m1", 1, _chat(calls=[{"tool.name": "read_file", "tool.args": {"path": "x"}}])),
        _span("t1", 2, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                        "gen_ai.tool.args": '{"path": "x"}'}, status="ERROR", events=error),
        _span("m2", 3, _chat("gave up")),
    ]
    [call] = rows_for_trace(spans, source="otlp")["tool_call_records"]
    assert (call["observation"], call["is_error"], call["error_type"]) == (
        "FileNotFoundError: No such file: x", True, "FileNotFoundError")


def test_a_final_answer_in_code_with_no_span_is_the_call_and_the_answer() -> None:
    text = "Thought: done.\n<code>\nfinal_answer('42')\n</code>"
    spans = [_span("a0", 0, AGENT, parent=None), _span("m1", 1, _chat(text))]
    rows = rows_for_trace(spans, source="otlp")
    [call] = rows["tool_call_records"]
    assert (call["tool"], json.loads(call["args"])) == ("final_answer", {"answer": "42"})
    assert rows["run_records"][0]["answer"] == "42"  # not the model's text around the code


def test_the_same_code_three_times_is_the_same_action() -> None:
    """Code that calls no tool is one call of the interpreter, keyed by the code: a loop of it repeats."""
    code = "<code>\nx = compute()\nprint(x)\n</code>"
    oi = {"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant"}
    spans = [_span("a0", 0, {"openinference.span.kind": "AGENT"}, parent=None, name="CodeAgent.run")]
    for i in range(4):
        step = {"openinference.span.kind": "CHAIN", "output.value": "Execution logs:\nNone"}
        spans.append(_span(f"s{i}", 10 * i + 1, step, name=f"Step {i + 1}"))
        text = code if i < 3 else "<code>\nfinal_answer('no')\n</code>"
        spans.append(_span(f"m{i}", 10 * i + 2, {**oi, "llm.output_messages.0.message.content": text},
                           parent=f"s{i}"))
    spans.append(_span("f", 33, {"openinference.span.kind": "TOOL", "tool.name": "final_answer",
                                 "input.value": json.dumps({"args": ["no"], "kwargs": {},
                                                            "sanitize_inputs_outputs": False}),
                                 "tool.parameters": json.dumps({"answer": {"type": "any"}})}, parent="s3",
                       name="FinalAnswerTool"))
    rows = rows_for_trace(spans, source="otlp")
    calls = [(r["step"], r["tool"], json.loads(r["args"]), r["observation"]) for r in rows["tool_call_records"]]
    code_call = {"code": "x = compute()\nprint(x)"}
    assert calls == [*((s, fw.CODE_TOOL, code_call, "Execution logs:\nNone") for s in (1, 2, 3)),
                     (4, "final_answer", {"answer": "no"}, None)]
    assert len({call_key(tool, args) for _, tool, args, _ in calls[:3]}) == 1
    assert rows["run_records"][0]["answer"] == "no"  # the answer a FinalAnswerTool span carries
