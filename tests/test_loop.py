"""The real ReAct loop against the scripted Messages API server, one test per way a run can go.

Every test runs ``Agent`` over the real ``anthropic`` SDK, the local server and a real DuckDB store,
then checks both what the caller gets back (``RunResult``) and what a user will query later (the
documented views). Nothing in the loop is patched: scripts, faults and tools are all the tests change.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from looptrace.loop.agent import REFLECTION, Agent
from looptrace.loop.defences import COMPACTION_SYSTEM
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.policy import Policy
from looptrace.loop.replies import Disconnect, Fault, Handler, Reply, ScriptItem, StreamError
from looptrace.loop.result import RunResult
from looptrace.loop.scripted import SCRIPTED_MODEL, Script, act, acts, finish, say
from looptrace.loop.server import MessagesServer
from looptrace.loop.subagents import subagents
from looptrace.loop.tools import Tool
from looptrace.tracer import Tracing
from looptrace.tracer.records.requests import rebuild_requests
from looptrace.tracer.store import Store

TASK = "Find the answer to the test question."
FAST_RETRY = RetryPolicy(base_delay=0.01, max_delay=0.05)


def _schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


# The three calls of one step meet here: only calls that run at the same time get past it (in turn, the
# first would wait out the timeout and fail). A barrier resets once passed, so it serves every run.
_TOGETHER = threading.Barrier(3, timeout=30)


def _slow(n: int) -> str:
    _TOGETHER.wait()
    # Later calls finish first, so results can only line up with their calls by tool_use_id.
    time.sleep(0.25 - 0.05 * n)
    return f"slow result {n}"


def _boom() -> str:
    raise ValueError("kaboom")


ECHO = Tool("echo", "Echo the text back.", _schema(text={"type": "string"}), lambda text: f"echo: {text}")
READ = Tool("read", "Read part of a file.", _schema(path={"type": "string"}, offset={"type": "integer"}),
            lambda path, offset: f"{path} from line {offset}: ...")
SLOW = Tool("slow", "Takes a while.", _schema(n={"type": "integer"}), _slow)
BOOM = Tool("boom", "Always fails.", _schema(), _boom)
BIG_TEXT = "0123456789" * 500  # 5000 bytes
BIG = Tool("big", "Returns a lot of text.", _schema(), lambda: BIG_TEXT)
TOOLS = (ECHO, READ, SLOW, BOOM, BIG)


def echoes(n: int) -> list[ScriptItem]:
    """``n`` distinct actions: busy, never repeating, never finishing."""
    return [act("echo", {"text": f"step {i}"}) for i in range(n)]


_REQUESTS_SQL = """
SELECT call_id, base_call_id, params, system_sha, system, tools_sha, tools, messages_keep, messages_append
FROM llm_call_records ORDER BY started_at
"""


@dataclass
class Stored:
    """Rows of the documented views after a run, read in one session (each session costs ~0.1 s)."""

    runs: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    llm_calls: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    requests: list[dict[str, Any]]  # every recorded model request, rebuilt as replay will see it

    @classmethod
    def read(cls, db: Path) -> Stored:
        views = {}
        with Store(db).reader(locked_down=False, absorb=False) as conn:
            for view, order in (("runs", "started_at"), ("steps", "run_id, step, call_index"),
                                ("llm_calls", "run_id, step, started_at"),
                                ("tool_calls", "run_id, step, call_index")):
                cursor = conn.execute(f"SELECT * FROM {view} ORDER BY {order}")
                names = [d[0] for d in cursor.description or []]
                views[view] = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            rows = conn.execute(_REQUESTS_SQL).fetchall()
        for step in views["steps"]:
            step["events"] = json.loads(step["events"]) if step["events"] else []
        rebuilt = rebuild_requests(
            {"call_id": r[0], "base_call_id": r[1], "params": json.loads(r[2]), "system_sha": r[3],
             "system": json.loads(r[4]) if r[4] else None, "tools_sha": r[5],
             "tools": json.loads(r[6]) if r[6] else None, "keep": r[7], "append": json.loads(r[8])}
            for r in rows)
        return cls(**views, requests=list(rebuilt.values()))

    def run(self, run_id: str) -> dict[str, Any]:
        [row] = [r for r in self.runs if r["run_id"] == run_id]
        return row

    def steps_of(self, run_id: str) -> list[dict[str, Any]]:
        return [s for s in self.steps if s["run_id"] == run_id]

    def events(self, run_id: str, name: str) -> list[tuple[int, dict[str, Any]]]:
        """(step, attributes) of every event called ``name`` in the run."""
        return [(s["step"], e["attributes"])
                for s in self.steps_of(run_id) for e in s["events"] if e["name"] == name]


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "empty.duckdb"
    Store(path).compact()  # creates and migrates the file
    return path


@pytest.fixture(autouse=True)
def _migrated(db: Path, empty_store: Path) -> None:
    # Migrating a new file costs more than a short run; every test starts from a copy of one instead.
    shutil.copyfile(empty_store, db)


def run_loop(
    db: Path,
    script: Sequence[ScriptItem] | Mapping[str, Sequence[ScriptItem]] | Handler,
    *,
    policy: Policy = Policy(),
    retry: RetryPolicy = FAST_RETRY,
    timeout: float = 10.0,
    tools: Sequence[Tool] = TOOLS,
    workers: Policy | None = None,
    spawn: bool = False,
) -> tuple[RunResult, MessagesServer, Stored]:
    """Run the agent on TASK against a scripted server; return its result, the server and the stored rows.

    ``script`` is TASK's replies, replies by task (sub-agents), or a whole server handler.
    """
    if isinstance(script, Mapping):
        handler: Handler = Script(script)
    elif callable(script):
        handler = script
    else:
        handler = Script({TASK: list(script)})
    with MessagesServer(handler) as server:
        model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="x", retry=retry,
                               timeout=timeout)
        tracing = Tracing(db)
        try:
            agent = Agent(model, tools, tracing, policy=policy)
            if spawn:
                agent.tool_factories = [subagents(agent, workers)]
            result = agent.run(TASK)
        finally:
            tracing.shutdown(compact=False)  # readers see the flushed segments, as `looptrace sql` does
    return result, server, Stored.read(db)


def bodies(server: MessagesServer, *, compaction: bool = False) -> list[dict[str, Any]]:
    """Request bodies the server received: the loop's own calls, or only the compaction calls."""
    out = [r["body"] for r in server.requests if r["path"] == "/v1/messages"]
    return [b for b in out if (b.get("system") == COMPACTION_SYSTEM) == compaction]


def assert_replayable(server: MessagesServer, stored: Stored) -> None:
    """The store holds every distinct request the server received, exactly (retries resend the same one)."""
    def canonical(body: Mapping[str, Any]) -> str:
        return json.dumps({k: v for k, v in body.items() if k != "stream"}, sort_keys=True)

    sent = {canonical(b) for b in bodies(server) + bodies(server, compaction=True)}
    assert sorted(sent) == sorted(canonical(r) for r in stored.requests)


def texts(message: Mapping[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]


def tool_results(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def assert_accounted(result: RunResult, row: Mapping[str, Any]) -> None:
    """Tokens and cost were counted, and the store agrees with the result."""
    assert result.input_tokens > 0 and result.output_tokens > 0 and result.cost_usd > 0
    assert (row["input_tokens"], row["output_tokens"]) == (result.input_tokens, result.output_tokens)
    assert row["cost_usd"] == pytest.approx(result.cost_usd)
    assert result.messages and result.messages[0] == {"role": "user", "content": TASK}


# -- stop conditions ------------------------------------------------------------------------------


def test_done_tool_ends_the_run_ok(db: Path) -> None:
    script = [act("echo", {"text": "hi"}, "Let me check first."), finish("42", "Done.")]
    result, server, stored = run_loop(db, script)

    assert (result.status, result.answer, result.steps, result.error) == ("ok", "42", 2, None)
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user", "assistant", "user"]
    [done] = tool_results(result.messages[-1])
    assert done["content"] == "42"
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["answer"], row["error"]) == ("ok", 2, "42", None)
    assert (row["model"], row["n_llm_calls"]) == (SCRIPTED_MODEL, 2)
    assert_accounted(result, row)
    assert [(s["step"], s["thought"], s["tool"], s["observation"]) for s in stored.steps] == [
        (1, "Let me check first.", "echo", "echo: hi"), (2, "Done.", "done", "42")]
    assert len(server.requests) == 2
    assert_replayable(server, stored)


def test_end_turn_text_is_the_answer(db: Path) -> None:
    result, _, stored = run_loop(db, [say("The answer is 42.")])

    assert (result.status, result.answer, result.steps, result.error) == ("ok", "The answer is 42.", 1, None)
    assert result.messages[-1] == {"role": "assistant",
                                   "content": [{"type": "text", "text": "The answer is 42."}]}
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["answer"], row["error"]) == (
        "ok", 1, "The answer is 42.", None)
    assert_accounted(result, row)
    [step] = stored.steps
    assert (step["thought"], step["tool"]) == ("The answer is 42.", None)


def test_max_iters_stops_after_exactly_max_iters_steps(db: Path) -> None:
    result, server, stored = run_loop(db, echoes(10), policy=Policy(max_iters=3))

    assert (result.status, result.answer, result.steps) == ("max_iters", None, 3)
    assert result.error is not None and "max_iters=3" in result.error
    assert len(server.requests) == 3
    assert result.messages[-1]["role"] == "user" and tool_results(result.messages[-1])
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["answer"], row["n_llm_calls"]) == ("max_iters", 3, None, 3)
    assert row["error"] == result.error
    assert_accounted(result, row)


def test_a_model_asking_to_ignore_the_cap_is_still_stopped(db: Path) -> None:
    plea = "ignore max_iters, I need 50 more steps"
    script = [act("echo", {"text": f"try {i}"}, plea) for i in range(10)]
    result, server, stored = run_loop(db, script, policy=Policy(max_iters=2))

    assert (result.status, result.steps) == ("max_iters", 2)
    assert len(server.requests) == 2
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"]) == ("max_iters", 2)
    assert [s["thought"] for s in stored.steps] == [plea, plea]
    assert_accounted(result, row)


def test_budget_stops_once_the_cost_reaches_it(db: Path) -> None:
    # 100k input tokens at $3/M is $0.30 a call: the third call would start at $0.60 >= $0.50.
    script = [act("echo", {"text": f"page {i}"}, input_tokens=100_000, output_tokens=100) for i in range(5)]
    result, server, stored = run_loop(db, script, policy=Policy(budget_usd=0.50))

    assert (result.status, result.steps, result.answer) == ("budget_exceeded", 2, None)
    assert result.cost_usd >= 0.50
    assert result.error is not None and "budget" in result.error
    assert len(server.requests) == 2
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["error"]) == ("budget_exceeded", 2, result.error)
    assert row["cost_usd"] >= 0.50
    assert_accounted(result, row)


def test_repeating_one_action_gets_two_reflections_then_stagnates(db: Path) -> None:
    result, server, stored = run_loop(db, [act("read", {"path": "a.txt", "offset": 1})] * 12)

    # Three repeats trigger a reflection, which restarts the count: 3 + 3 + 3 steps.
    assert (result.status, result.steps, result.reflections, result.answer) == ("stagnated", 9, 2, None)
    assert result.error is not None and result.error.startswith("stagnated")
    assert result.messages[-1]["role"] == "user"
    reflection = REFLECTION.format(detail="the same action 3 times in a row")
    sent = bodies(server)
    assert len(sent) == 9
    for i, body in enumerate(sent):
        seen = [t for m in body["messages"] for t in texts(m) if t == reflection]
        assert len(seen) == (0 if i < 3 else 1 if i < 6 else 2), i
    assert reflection in texts(sent[3]["messages"][-1])  # right after the results of the third repeat
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["error"]) == ("stagnated", 9, result.error)
    assert [s for s, _ in stored.events(result.run_id, "reflection")] == [3, 6]
    [(step, attrs)] = stored.events(result.run_id, "stagnation")
    assert (step, attrs["kind"], attrs["repeated"]) == (9, "repeat", 3)
    assert_accounted(result, row)
    assert_replayable(server, stored)  # reflections included


def test_a_cycle_of_two_actions_stagnates(db: Path) -> None:
    a, b = act("echo", {"text": "A"}), act("read", {"path": "b.txt", "offset": 1})
    result, server, stored = run_loop(db, [a, b] * 8)

    assert (result.status, result.steps, result.reflections) == ("stagnated", 12, 2)
    reflection = REFLECTION.format(detail="a cycle of 2 actions, repeated")
    assert reflection in texts(bodies(server)[4]["messages"][-1])
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"]) == ("stagnated", 12)
    assert [s for s, _ in stored.events(result.run_id, "reflection")] == [4, 8]
    [(_, attrs)] = stored.events(result.run_id, "stagnation")
    assert (attrs["kind"], attrs["period"]) == ("cycle", 2)


def test_alternating_reads_of_different_files_at_new_offsets_is_not_stagnation(db: Path) -> None:
    reads = [act("read", {"path": p, "offset": o}) for o in (1, 201, 401, 601) for p in ("a.txt", "b.txt")]
    result, server, stored = run_loop(db, [*reads, finish("read them all")])

    assert (result.status, result.steps, result.reflections, result.answer) == ("ok", 9, 0, "read them all")
    assert not any("repeating yourself" in t for b in bodies(server) for m in b["messages"] for t in texts(m))
    assert stored.events(result.run_id, "reflection") == []
    assert stored.run(result.run_id)["status"] == "ok"


def test_a_reply_cut_at_max_tokens_without_an_action_is_an_error(db: Path) -> None:
    cut = Reply([{"type": "text", "text": "Let me think about this at great len"}], stop_reason="max_tokens")
    result, _, stored = run_loop(db, [cut])

    assert (result.status, result.steps, result.answer) == ("error", 1, None)
    assert result.error is not None and "max_tokens" in result.error
    assert result.messages[-1]["role"] == "assistant"
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["error"]) == ("error", 1, result.error)
    assert_accounted(result, row)


# -- tools --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("call", "error_type", "says"), [
    (("grep", {"pattern": "TODO"}), "tool_not_found", "there is no tool named 'grep'"),
    (("echo", {"txt": "typo"}), "invalid_arguments", "invalid arguments for echo"),
    (("boom", {}), "ValueError", "boom failed: ValueError: kaboom"),
], ids=["unknown-tool", "invalid-arguments", "tool-raises"])
def test_a_failed_tool_call_is_an_error_observation_and_the_run_recovers(
    db: Path, call: tuple[str, dict[str, Any]], error_type: str, says: str,
) -> None:
    result, server, stored = run_loop(db, [act(*call), finish("recovered")])

    assert (result.status, result.answer, result.steps) == ("ok", "recovered", 2)
    [sent] = tool_results(bodies(server)[1]["messages"][-1])
    assert sent["is_error"] is True and says in sent["content"]
    first = stored.steps[0]
    assert (first["tool"], json.loads(first["args"]), first["is_error"], first["error_type"]) == (
        call[0], call[1], True, error_type)
    assert says in first["observation"]
    assert stored.run(result.run_id)["status"] == "ok"


def test_parallel_tool_calls_run_at_once_and_results_match_by_id(db: Path) -> None:
    calls = [("slow", {"n": n}) for n in range(3)]
    result, server, stored = run_loop(db, [acts(calls, "Three at once."), finish("all three")])

    assert (result.status, result.steps) == ("ok", 2)
    asked, answered = bodies(server)[1]["messages"][1:3]
    ids = [b["id"] for b in asked["content"] if b["type"] == "tool_use"]
    assert len(set(ids)) == 3
    assert [(b["tool_use_id"], b["content"]) for b in tool_results(answered)] == [
        (ids[n], f"slow result {n}") for n in range(3)]
    first = [s for s in stored.steps if s["step"] == 1]
    assert [(s["call_index"], s["tool_call_id"], s["observation"]) for s in first] == [
        (n, ids[n], f"slow result {n}") for n in range(3)]
    # Each call's time is its own (at least its sleep) and the step's span covers all three. How much
    # running them together saves is a timing claim: `make bench` prints it as a ratio (bench/timings.py).
    step_ms = (first[0]["ended_at"] - first[0]["started_at"]).total_seconds() * 1000
    calls_ms = [c["duration_ms"] for c in stored.tool_calls if c["step"] == 1]
    assert [ms >= want - 5 for ms, want in zip(calls_ms, (250, 200, 150), strict=True)] == [True] * 3
    assert step_ms >= max(calls_ms) - 1


# -- faults -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fault", "error"), [
    (Fault(529), "OverloadedError"),
    (Fault(500, "api_error", "internal"), "InternalServerError"),
    (Fault(503, "api_error", "unavailable"), "ServiceUnavailableError"),
    (StreamError(), "overloaded_error"),
    (Disconnect(), "APIConnectionError"),
], ids=["529", "500", "503", "mid-stream", "disconnect"])
def test_a_transient_fault_is_retried_within_the_same_step(db: Path, fault: ScriptItem, error: str) -> None:
    result, server, stored = run_loop(db, [act("echo", {"text": "x"}), fault, finish("fine")])

    assert (result.status, result.answer, result.steps) == ("ok", "fine", 2)
    assert len(server.requests) == 3
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["n_llm_calls"]) == ("ok", 2, 2)  # no duplicate step or call
    [(step, attrs)] = stored.events(result.run_id, "retry")
    assert step == 2 and attrs["attempt"] == 1 and error in attrs["error"]
    assert 0 < attrs["wait_seconds"] <= FAST_RETRY.max_delay
    assert [(c["step"], c["retries"], c["error"]) for c in stored.llm_calls] == [(1, 0, None), (2, 1, None)]
    assert_replayable(server, stored)


def test_a_429_waits_as_long_as_retry_after_says(db: Path) -> None:
    result, server, stored = run_loop(db, [Fault(429, "rate_limit_error", "slow down", retry_after=0.03),
                                           finish("ok")])

    assert (result.status, result.steps) == ("ok", 1)
    assert len(server.requests) == 2
    [(_, attrs)] = stored.events(result.run_id, "retry")
    assert "RateLimitError" in attrs["error"] and attrs["wait_seconds"] == 0.03  # honoured exactly, no jitter
    assert [c["retries"] for c in stored.llm_calls] == [1]


@pytest.mark.slow
def test_a_timeout_is_retried(db: Path) -> None:
    # The retried request must come back within the timeout too: 5 s, so a loaded machine cannot make it
    # time out as well (0.2 s could). The first reply's 30 s delay ends when the server stops.
    slow = Reply([{"type": "text", "text": "too late"}], delay=30.0)
    result, server, stored = run_loop(db, [slow, finish("in time")], timeout=5.0)

    assert (result.status, result.answer, result.steps) == ("ok", "in time", 1)
    assert len(server.requests) == 2
    [(_, attrs)] = stored.events(result.run_id, "retry")
    assert "APITimeoutError" in attrs["error"]
    assert stored.run(result.run_id)["n_steps"] == 1


def test_exhausted_retries_end_the_run_with_the_error(db: Path) -> None:
    script = [act("echo", {"text": "x"}), *[Fault(529, message="Overloaded, try later")] * 3, finish("never")]
    retry = RetryPolicy(max_retries=2, base_delay=0.01, max_delay=0.05)
    result, server, stored = run_loop(db, script, retry=retry)

    assert (result.status, result.steps, result.answer) == ("error", 2, None)
    assert result.error is not None and "Overloaded, try later" in result.error
    assert len(server.requests) == 4  # one call, then one call and its two retries
    assert result.messages[-1]["role"] == "user"
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["error"]) == ("error", 2, result.error)
    [failed] = [c for c in stored.llm_calls if c["step"] == 2]
    assert failed["retries"] == 2 and "Overloaded, try later" in failed["error"]
    assert [a["attempt"] for _, a in stored.events(result.run_id, "retry")] == [1, 2]
    assert_replayable(server, stored)


@pytest.mark.parametrize(("message", "status"), [
    ("messages: roles must alternate", "error"),
    ("prompt is too long: 212345 tokens > 200000 maximum", "context_overflow"),
    # The API's answer when input + max_tokens passes the window (the prompt alone may still fit).
    ("input length and `max_tokens` exceed context limit: 199000 + 2048 > 200000, decrease input "
     "length or `max_tokens` and try again", "context_overflow"),
], ids=["bad-request", "prompt-too-long", "input-plus-max-tokens-over-limit"])
def test_a_400_is_final_at_once(db: Path, message: str, status: str) -> None:
    result, server, stored = run_loop(db, [Fault(400, "invalid_request_error", message), finish("never")])

    assert (result.status, result.steps, result.answer) == (status, 1, None)
    assert result.error is not None and message in result.error
    assert len(server.requests) == 1
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["error"]) == (status, 1, result.error)
    assert stored.events(result.run_id, "retry") == []
    [call] = stored.llm_calls
    assert call["retries"] == 0 and message in call["error"]


# -- defences -----------------------------------------------------------------------------------


def test_a_large_tool_result_is_trimmed_for_the_model_but_stored_whole(db: Path) -> None:
    script = [act("big", {}), finish("seen")]
    result, server, stored = run_loop(db, script, policy=Policy(max_observation_bytes=1000))

    assert result.status == "ok"
    [sent] = tool_results(bodies(server)[1]["messages"][-1])
    assert sent["content"].startswith(BIG_TEXT[:1000] + "\n[looptrace: trimmed 4000 of 5000 bytes")
    assert BIG_TEXT[:1001] not in sent["content"]
    first = stored.steps[0]
    assert (first["observation"], first["observation_bytes"]) == (BIG_TEXT, 5000)
    [(step, attrs)] = stored.events(result.run_id, "trim")
    assert (step, attrs["tool"], attrs["cut_bytes"], attrs["kept_bytes"]) == (1, "big", 4000, 1000)
    assert_replayable(server, stored)  # the recorded request holds what the model saw: the trimmed text


def test_the_trim_event_counts_kept_bytes_exactly_with_multibyte_text(db: Path) -> None:
    # 'é' is 2 bytes: a 1001-byte limit keeps 500 characters (1000 bytes) and cuts 5000 of 6000.
    accents = Tool("accents", "Accented text.", _schema(), lambda: "é" * 3000)
    result, _, stored = run_loop(db, [act("accents", {}), finish("ok")], tools=[accents],
                                 policy=Policy(max_observation_bytes=1001))
    [(_, attrs)] = stored.events(result.run_id, "trim")
    assert attrs["cut_bytes"] == 5000
    assert attrs["kept_bytes"] + attrs["cut_bytes"] == 6000


def test_compaction_summarises_old_turns_and_the_run_goes_on(db: Path) -> None:
    # Every context is over the limit, but there is nothing to compact until two assistant turns exist.
    script = [act("echo", {"text": "one"}), act("read", {"path": "a.txt", "offset": 1}),
              finish("compacted fine")]
    result, server, stored = run_loop(db, script, policy=Policy(compact_at_tokens=1, keep_recent_turns=1))

    assert (result.status, result.answer, result.steps) == ("ok", "compacted fine", 3)
    kinds = ["compaction" if r["body"].get("system") == COMPACTION_SYSTEM else "main"
             for r in server.requests]
    assert kinds == ["main", "main", "compaction", "main"]
    [summary_request] = bodies(server, compaction=True)
    [prompt] = summary_request["messages"]
    assert prompt["content"].startswith(f"<transcript>\nuser: {TASK}") and "echo: one" in prompt["content"]
    before, after = bodies(server)[1:]
    assert len(before["messages"]) == 3 and len(after["messages"]) == 3  # 5 without compaction
    head = after["messages"][0]
    assert head["role"] == "user" and head["content"].startswith(f"{TASK}\n\n[Summary of earlier turns")
    assert [m["role"] for m in after["messages"]] == ["user", "assistant", "user"]
    assert [b["name"] for b in after["messages"][1]["content"] if b["type"] == "tool_use"] == ["read"]
    assert result.messages[0] == head
    [(step, attrs)] = stored.events(result.run_id, "compaction")
    assert (step, attrs["messages_before"], attrs["messages_after"]) == (3, 5, 3)
    row = stored.run(result.run_id)
    assert (row["status"], row["n_steps"], row["n_llm_calls"]) == ("ok", 3, 4)
    assert [c["step"] for c in stored.llm_calls] == [1, 2, 3, 3]
    assert_replayable(server, stored)  # the summary request and the compacted one included


def test_a_failed_compaction_is_recorded_and_the_run_goes_on_uncompacted(db: Path) -> None:
    script = Script({TASK: [act("echo", {"text": "one"}), act("echo", {"text": "two"}), finish("fine")]})

    def no_summaries(body: dict[str, Any]) -> ScriptItem:
        if body.get("system") == COMPACTION_SYSTEM:
            return Fault(400, "invalid_request_error", "summaries are switched off")
        return script(body)

    policy = Policy(compact_at_tokens=1, keep_recent_turns=1)
    result, server, stored = run_loop(db, no_summaries, policy=policy)

    assert (result.status, result.answer, result.steps) == ("ok", "fine", 3)
    assert len(bodies(server)[-1]["messages"]) == 5  # nothing was dropped
    [(step, attrs)] = stored.events(result.run_id, "compaction_failed")
    assert step == 3 and "summaries are switched off" in attrs["error"]
    assert stored.events(result.run_id, "compaction") == []
    assert [(c["step"], c["error"] is None) for c in stored.llm_calls] == [
        (1, True), (2, True), (3, False), (3, True)]


def test_the_scratchpad_is_shown_in_every_later_system_prompt(db: Path) -> None:
    note = "PLAN: read a.txt, then b.txt; the answer is in b."
    script = [act("scratchpad", {"content": note}), act("echo", {"text": "x"}), finish("done")]
    result, server, stored = run_loop(db, script)

    assert result.status == "ok"
    systems = [b["system"] for b in bodies(server)]
    assert "<scratchpad>" not in systems[0]
    assert all(f"<scratchpad>\n{note}\n</scratchpad>" in s for s in systems[1:])
    assert_replayable(server, stored)
    assert (stored.steps[0]["tool"], stored.steps[0]["is_error"]) == ("scratchpad", False)


# -- sub-agents -----------------------------------------------------------------------------------

LEFT, RIGHT = "Sub-task: what is on the left?", "Sub-task: what is on the right?"


def test_an_orchestrator_runs_two_sub_agents_and_gets_their_answers(db: Path) -> None:
    script = {
        TASK: [acts([("spawn_subagent", {"task": LEFT, "tools": ["echo"]}),
                     ("spawn_subagent", {"task": RIGHT})], "One worker per side."),
               finish("left and right")],
        LEFT: [act("echo", {"text": "left"}), finish("a tree")],
        RIGHT: [finish("a house")],
    }
    result, server, stored = run_loop(db, script, spawn=True)

    assert (result.status, result.answer, result.steps) == ("ok", "left and right", 2)
    assert len(stored.runs) == 3
    children = {r["task"]: r for r in stored.runs if r["parent_run_id"] is not None}
    assert set(children) == {LEFT, RIGHT}
    assert {(r["parent_run_id"], r["status"], r["strategy"]) for r in children.values()} == {
        (result.run_id, "ok", "subagent")}
    assert (children[LEFT]["answer"], children[LEFT]["n_steps"]) == ("a tree", 2)
    assert (children[RIGHT]["answer"], children[RIGHT]["n_steps"]) == ("a house", 1)
    # The orchestrator's next request carries each answer under the id of the call that asked for it.
    mine = [b for b in bodies(server) if b["messages"][0]["content"] == TASK]
    asked, answered = mine[1]["messages"][1:3]
    ids = [b["id"] for b in asked["content"] if b["type"] == "tool_use"]
    assert [(b["tool_use_id"], b["content"]) for b in tool_results(answered)] == [(ids[0], "a tree"),
                                                                                  (ids[1], "a house")]
    # A sub-agent sees only the tools it was given (plus done and its scratchpad).
    left_first = next(b for b in bodies(server) if b["messages"][0]["content"] == LEFT)
    assert [t["name"] for t in left_first["tools"]] == ["echo", "done", "scratchpad"]
    assert_replayable(server, stored)


def test_a_sub_agent_that_hits_its_own_cap_is_an_error_observation(db: Path) -> None:
    script = {TASK: [act("spawn_subagent", {"task": LEFT}), finish("gave up on the left")], LEFT: echoes(5)}
    result, server, stored = run_loop(db, script, spawn=True, workers=Policy(max_iters=2))

    assert (result.status, result.answer, result.steps) == ("ok", "gave up on the left", 2)
    [child] = [r for r in stored.runs if r["parent_run_id"] == result.run_id]
    assert (child["status"], child["n_steps"]) == ("max_iters", 2)
    first = stored.steps_of(result.run_id)[0]
    assert (first["tool"], first["is_error"], first["error_type"]) == ("spawn_subagent", True, "tool_error")
    assert "sub-agent stopped with status max_iters" in first["observation"]
    [sent] = tool_results(bodies(server)[-1]["messages"][-1])
    assert sent["is_error"] is True and "max_iters" in sent["content"]


def test_a_sub_agent_given_no_tools_gets_none(db: Path) -> None:
    script = {TASK: [act("spawn_subagent", {"task": LEFT, "tools": []}), finish("thought about it")],
              LEFT: [finish("pure reasoning")]}
    result, server, _ = run_loop(db, script, spawn=True)

    assert result.status == "ok"
    left_first = next(b for b in bodies(server) if b["messages"][0]["content"] == LEFT)
    assert [t["name"] for t in left_first["tools"]] == ["done", "scratchpad"]


def test_a_sub_agent_asked_for_an_unknown_tool_is_an_error_observation(db: Path) -> None:
    script = {TASK: [act("spawn_subagent", {"task": LEFT, "tools": ["rm_rf"]}), finish("no worker")]}
    result, _, stored = run_loop(db, script, spawn=True)

    assert (result.status, result.answer) == ("ok", "no worker")
    assert len(stored.runs) == 1
    first = stored.steps[0]
    assert (first["is_error"], first["error_type"]) == (True, "invalid_arguments")
    assert "rm_rf" in first["observation"]
