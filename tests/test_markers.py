"""Every end marker of replay/analyzer/markers.py on an example in its public format's own words."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.replay.analyzer.markers import MARKERS, find_markers
from looptrace.tracer import Tracing
from looptrace.tracer.ingest.files.importing import write_trajectories
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory
from looptrace.tracer.store import Store

# (format, where the words appear, example, label)
EXAMPLES: list[tuple[str, str, str, str]] = [
    ("SWE-agent exit status / closing action", "attributes", "submitted (exit_cost)", "cap_hit"),
    ("SWE-agent closing response", "step", "Exit due to cost limit", "cap_hit"),
    ("SWE-agent 1.x exit status", "attributes", "exit_total_execution_time", "cap_hit"),
    ("mini-swe-agent exit status", "attributes", "LimitsExceeded", "cap_hit"),
    ("Magentic-One orchestrator (AutoGen)", "step", "Max rounds (20) reached.", "cap_hit"),
    ("Magentic-One orchestrator (AutoGen)", "step", "Replan counter exceeded... Stopping.", "cap_hit"),
    ("Magentic-One orchestrator (AutoGen AgentChat 0.4+ stop reason)", "attributes",
     '{"format": "autogen-agentchat", "stop_reason": "Max rounds reached."}', "cap_hit"),
    ("AutoGen / harness time limit", "error", "TimeoutError: maximum time exceeded", "cap_hit"),
    ("AutoGen AgentChat termination", "step", "Maximum number of messages 10 reached, current message count: 10",
     "cap_hit"),
    ("AutoGen AgentChat token usage termination", "attributes",
     '{"stop_reason": "Token usage limit reached, total token count: 12040, prompt token count: 11800, '
     'completion token count: 240."}', "cap_hit"),
    ("AutoGen AgentChat timeout termination", "attributes", '{"stop_reason": "Timeout of 300 seconds reached"}',
     "cap_hit"),
    ("OpenAI Agents SDK", "error", "agents.exceptions.MaxTurnsExceeded: Max turns (10) exceeded", "cap_hit"),
    ("smolagents", "step", "Reached max steps.", "cap_hit"),
    ("LangGraph", "error", "GraphRecursionError: Recursion limit of 25 reached without hitting a stop condition",
     "cap_hit"),
    ("LangChain AgentExecutor", "answer", "Agent stopped due to iteration limit or time limit.", "cap_hit"),
    ("OpenHands agent state", "error", "RuntimeError: Agent reached maximum iteration in headless mode. "
     "Current iteration: 100, max iteration: 100", "cap_hit"),
    ("OpenHands agent state", "error", "Agent reached maximum budget for conversation", "cap_hit"),
    ("Inspect AI sample limit event", "step", '{"event": "sample_limit", "type": "message", "limit": 50}', "cap_hit"),
    ("Inspect AI limit message", "step", "Token limit of 100,000 exceeded", "cap_hit"),
    ("SWE-agent exit status", "attributes", "exit_context", "context_bomb"),
    ("LiteLLM exception (OpenHands, SWE-agent)", "error",
     "litellm.ContextWindowExceededError: litellm.BadRequestError", "context_bomb"),
    ("OpenAI API error code", "error", "Error code: 400 - {'error': {'code': 'context_length_exceeded'}}",
     "context_bomb"),
    ("Anthropic Messages API error", "error", "prompt is too long: 205000 tokens > 200000 maximum", "context_bomb"),
    ("OpenAI API error message", "error", "This model's maximum context length is 8192 tokens.", "context_bomb"),
    ("Anthropic stop_reason", "step", '{"stop_reason": "model_context_window_exceeded"}', "context_bomb"),
    ("Inspect AI stop reason", "step", '{"stop_reason": "model_length"}', "context_bomb"),
    ("SWE-agent exit status", "attributes", "exit_format", "hallucinated_tool"),
    ("OpenAI Agents SDK (unknown tool, bad JSON)", "error", "ModelBehaviorError: Tool lookup_weather not found in agent",
     "hallucinated_tool"),
    ("OpenHands stuck detector", "error", "AgentStuckInLoopError: Agent got stuck in a loop", "stagnation"),
    ("SWE-agent / mini-swe-agent exit status", "attributes", "Submitted", "ok"),
    ("tau-bench user simulator", "step", "Thank you! ###STOP###", "ok"),
    ("mini-swe-agent submission command", "step", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff", "ok"),
    ("OpenHands finish action", "step", '{"action": "finish", "class": "AgentFinishAction"}', "ok"),
    ("Magentic-One orchestrator (AutoGen)", "step", "Max time (1500s) reached.", "cap_hit"),
    ("AutoGen / AG2 termination word", "step", "The chart is saved as chart.png.\nTERMINATE", "ok"),
    ("Magentic-One / GAIA final answer", "step", "FINAL ANSWER: 3", "ok"),
    ("ReAct (LangChain, smolagents) final answer", "step", "Thought: I know it now.\nFinal Answer: 3", "ok"),
]


@pytest.mark.parametrize(("fmt", "where", "text", "label"), EXAMPLES, ids=[f"{e[0]}: {e[2][:30]}" for e in EXAMPLES])
def test_example_is_found_with_its_label_and_format(fmt: str, where: str, text: str, label: str) -> None:
    hits = find_markers([(where, text)])
    assert hits and hits[0].label == label and hits[0].format == fmt, hits


def test_every_marker_has_an_example_of_its_format() -> None:
    covered = {m for m in MARKERS for _, _, text, _ in EXAMPLES if m.compiled().search(text)}
    assert [m for m in MARKERS if m not in covered] == []
    assert {m.format for m in MARKERS} == {fmt for fmt, *_ in EXAMPLES}


@pytest.mark.parametrize("text", [
    "I will submit once the tests pass", "limit = 5  # max rounds", "the context is long", "recursion depth",
    "Exit due to", "exit_code 0",
])
def test_ordinary_words_are_not_markers(text: str) -> None:
    assert [h for h in find_markers([("step 3", text)]) if h.label != "ok"] == []


def steps(n: int, last_thought: str | None = None) -> list[ImportedStep]:
    out = [ImportedStep(step=i + 1, tool="read", args={"path": f"f{i}"}, observation=f"content {i}")
           for i in range(n)]
    out.append(ImportedStep(step=n + 1, thought=last_thought))
    return out


@pytest.mark.parametrize(("name", "trajectory", "label"), [
    ("an imported status the importer called ok, with a cap in its attributes",
     Trajectory(source="a", agent="x", status="ok", steps=steps(5), attributes={"exit_status": "LimitsExceeded"}),
     "cap_hit"),
    ("a chat log whose last message is the orchestrator's cap",
     Trajectory(source="b", agent="x", status="ok", steps=steps(5, "Max rounds (20) reached.")), "cap_hit"),
    ("a sub-agent's closing action", Trajectory(source="c", agent="x", status="ok", steps=steps(5, "exit_cost")),
     "cap_hit"),
    ("an error text from the provider", Trajectory(source="d", agent="x", status="error", steps=steps(5),
                                                   error="400 prompt is too long: 210000 tokens"), "context_bomb"),
    ("a run without an end record that submitted",
     Trajectory(source="e", agent="x", status="incomplete", steps=steps(5, "Submitted")), "ok"),
    ("a plain ok run", Trajectory(source="f", agent="x", status="ok", steps=steps(5, "All done.")), "ok"),
])
def test_markers_through_the_store(tmp_path: Path, name: str, trajectory: Trajectory, label: str) -> None:
    store = Store(tmp_path / "s.duckdb")
    write_trajectories(store, [trajectory])
    [result] = analyze_store(store)
    assert result.primary is not None and result.primary.label == label, (name, result.diagnoses)


def test_a_span_event_carries_the_marker_through_the_tracer(tmp_path: Path) -> None:
    """An Inspect-style limit event recorded on the last step span (real OTel pipeline, real store)."""
    db = tmp_path / "events.duckdb"
    with Tracing(db) as t:
        with t.run("agent", task="t", model="claude-sonnet-4") as run:
            for i in range(3):
                with run.step(f"step {i}") as step, step.tool_call("read", {"path": f"f{i}"}) as call:
                    call.result(f"content {i}")
            with run.step("over") as step:
                step.event("sample_limit", type="message", limit=50)
            run.finish("ok")
    [result] = analyze_store(Store(db))
    assert result.primary is not None and result.primary.label == "cap_hit", result.diagnoses
    assert result.primary.evidence["where"] == "step 4" and result.primary.evidence["format"].startswith("Inspect")
