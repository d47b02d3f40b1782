"""The loop's pure pieces, table-driven: stagnation, signatures, trimming, compaction cuts, backoff, tools."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from looptrace.loop import model
from looptrace.loop.defences import compacted, compaction_cut, trim
from looptrace.loop.model import RetryPolicy
from looptrace.loop.stagnation import Repetition, find_repetition, signature
from looptrace.loop.tools import INVALID_ARGUMENTS, TOOL_NOT_FOUND, Tool, ToolError, Toolbox, ToolResult

# -- find_repetition ------------------------------------------------------------------------------

A, B, C, D = (signature("read", {"path": p}) for p in "abcd")


@pytest.mark.parametrize(("actions", "window", "max_cycle", "expected"), [
    # the same action, window times in a row
    ([A, A, A], 3, 3, Repetition("repeat", 1, 3)),
    ([B, C, A, A, A], 3, 3, Repetition("repeat", 1, 3)),
    ([A, A], 3, 3, None),
    ([A, A, B], 3, 3, None),
    ([A, A], 2, 3, Repetition("repeat", 1, 2)),
    ([A, A, A, A], 5, 3, None),
    # a cycle of 2 or 3 distinct actions, repeated (window - 1 times, at least twice)
    ([A, B, A, B], 3, 3, Repetition("cycle", 2, 4)),
    ([C, A, B, A, B], 3, 3, Repetition("cycle", 2, 4)),
    ([A, B, A], 3, 3, None),
    ([A, B, C, A, B, C], 3, 3, Repetition("cycle", 3, 6)),
    ([A, B, C, A, B], 3, 3, None),
    ([A, B, C, A, B, C], 3, 2, None),  # longer than max_cycle
    ([A, B, A, B], 4, 3, None),  # window 4 wants three rounds
    ([A, B, A, B, A, B], 4, 3, Repetition("cycle", 2, 6)),
    ([A, B, A, B], 2, 3, Repetition("cycle", 2, 4)),
    # near misses
    ([A, B], 2, 3, None),  # the same tool on two different files
    ([A, B, A, B, C], 3, 3, None),  # the cycle was broken
    ([A, B, C, D, A, C, B, D], 3, 3, None),  # the same files, never in a cycle
    ([signature("read", {"path": "log", "offset": 1 + 200 * i}) for i in range(30)], 3, 3, None),
    ([signature(t, {"i": i}) for i in range(20) for t in ("list", "read", "search")], 3, 3, None),
    # a window below 2 never fires
    ([A, A, A], 1, 3, None),
    ([A, A, A], 0, 3, None),
    ([], 3, 3, None),
])
def test_find_repetition(
    actions: list[str], window: int, max_cycle: int, expected: Repetition | None,
) -> None:
    assert find_repetition(actions, window, max_cycle) == expected


@pytest.mark.parametrize(("a", "b", "same"), [
    (("read", {"a": 1, "b": 2}), ("read", {"b": 2, "a": 1}), True),
    (("read", {"q": {"x": [1, {"k": 1, "j": 2}]}}), ("read", {"q": {"x": [1, {"j": 2, "k": 1}]}}), True),
    (("read", {"path": "é"}), ("read", {"path": "é"}), True),
    (("read", {"path": "a.txt"}), ("read", {"path": "b.txt"}), False),
    (("read", {"path": "a.txt"}), ("list", {"path": "a.txt"}), False),
    (("read", {"n": 1}), ("read", {"n": "1"}), False),
    (("read", {"x": [1, 2]}), ("read", {"x": [2, 1]}), False),  # list order is meaning
])
def test_signature_canonicalises_key_order_only(a: tuple[str, Any], b: tuple[str, Any], same: bool) -> None:
    assert (signature(*a) == signature(*b)) is same


def test_signature_is_tool_name_then_compact_sorted_json() -> None:
    assert signature("read", {"b": 2, "a": [1, None]}) == 'read {"a":[1,null],"b":2}'


# -- trim -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "max_bytes", "head", "cut"), [
    ("hello", 10, "hello", 0),
    ("hello", 5, "hello", 0),
    ("hello", None, "hello", 0),
    ("x" * 100, None, "x" * 100, 0),
    ("hello world", 5, "hello", 6),
    ("é" * 10, 5, "éé", 16),  # 2-byte characters: never half of one
    ("é" * 10, 6, "ééé", 14),
    ("😀😀😀", 5, "😀", 8),  # 4-byte characters
    ("😀😀😀", 3, "", 12),
    ("abc", 0, "", 3),
])
def test_trim(text: str, max_bytes: int | None, head: str, cut: int) -> None:
    trimmed = trim(text, max_bytes)
    assert trimmed.cut_bytes == cut
    if cut == 0:
        assert trimmed.text == text
    else:
        total = len(text.encode())
        assert trimmed.text == f"{head}\n[looptrace: trimmed {cut} of {total} bytes; ask for a smaller part]"
        assert len(head.encode()) + cut == total  # the marker counts bytes, not characters
        assert "\ufffd" not in trimmed.text


# -- compaction_cut -------------------------------------------------------------------------------


def _conversation(turns: int) -> list[dict[str, Any]]:
    """A task, then ``turns`` assistant tool calls each answered by a tool_result."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "the task"}]
    for i in range(turns):
        out.append({"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read",
                                                      "input": {"i": i}}]})
        out.append({"role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": str(i)}]})
    return out


@pytest.mark.parametrize(("turns", "keep", "cut"), [
    (0, 4, None),
    (1, 1, None),  # too short: only one assistant turn, and it is kept
    (4, 4, None),
    (2, 1, 3),
    (5, 2, 7),
    (5, 4, 3),
    (3, 0, 7),  # keep nothing: the whole history is summarised
])
def test_compaction_cut(turns: int, keep: int, cut: int | None) -> None:
    messages = _conversation(turns)
    assert compaction_cut(messages, keep) == cut
    if cut is None or cut == len(messages):
        return
    assert messages[cut]["role"] == "assistant"
    tail = compacted(messages, cut, "the task", "a summary")
    roles = [m["role"] for m in tail]
    assert roles == ["user"] + ["assistant", "user"] * keep
    # Every kept tool_result still follows the tool_use it answers.
    blocks = [b for m in tail[1:] for b in m["content"]]
    used = [b["id"] for b in blocks if b["type"] == "tool_use"]
    answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert used == answered and len(used) == keep
    assert tail[0]["content"].startswith("the task\n\n[Summary of earlier turns")


def test_compacted_does_not_touch_the_original_messages() -> None:
    messages = _conversation(3)
    before = repr(messages)
    compacted(messages, 3, "the task", "a summary")[1]["role"] = "changed"
    assert repr(messages) == before


# -- RetryPolicy.delay ----------------------------------------------------------------------------

POLICY = RetryPolicy(base_delay=0.5, max_delay=20.0, jitter=0.25)


@pytest.mark.parametrize(("attempt", "raw"), [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (6, 16.0), (7, 32.0),
                                              (30, 0.5 * 2**29)])
@pytest.mark.parametrize("extreme", [-1, 0, 1])
def test_delay_is_exponential_with_jitter_of_a_quarter(
    monkeypatch: pytest.MonkeyPatch, attempt: int, raw: float, extreme: int,
) -> None:
    monkeypatch.setattr(model.random, "uniform", lambda low, high: {-1: low, 0: 0.0, 1: high}[extreme])
    # Jitter first, then the cap: a delay never exceeds max_delay.
    assert POLICY.delay(attempt) == pytest.approx(min(POLICY.max_delay, raw * (1 + 0.25 * extreme)))


def test_delay_jitter_stays_within_a_quarter_and_varies() -> None:
    samples = [POLICY.delay(3) for _ in range(500)]
    assert all(1.5 <= s <= 2.5 for s in samples)
    assert len(set(samples)) > 400  # parallel agents do not retry in step


def test_delay_never_exceeds_max_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model.random, "uniform", lambda low, high: high)
    assert POLICY.delay(30) <= POLICY.max_delay


@pytest.mark.parametrize(("retry_after", "expected"), [(0.0, 0.0), (3.0, 3.0), (19.5, 19.5), (20.0, 20.0),
                                                       (600.0, 20.0), (-5.0, 0.0)])
def test_delay_honours_retry_after_exactly_up_to_max_delay(retry_after: float, expected: float) -> None:
    assert all(POLICY.delay(attempt, retry_after) == expected for attempt in (1, 2, 10))


# -- Toolbox --------------------------------------------------------------------------------------


def _strict(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def _refuse(path: str) -> str:
    raise ToolError(f"no such file: {path}")


def _crash(path: str) -> str:
    return {"a": 1}[path]  # KeyError for anything but "a"


BOX = Toolbox([
    Tool("read", "Read a file.", _strict(path={"type": "string"}, limit={"type": "integer", "minimum": 1}),
         lambda path, limit: f"{limit} lines of {path}"),
    Tool("refuse", "Always refuses.", _strict(path={"type": "string"}), _refuse),
    Tool("crash", "Has a bug.", _strict(path={"type": "string"}), _crash),
])


@pytest.mark.parametrize(("name", "args", "result"), [
    ("read", {"path": "a.txt", "limit": 3}, ToolResult("3 lines of a.txt")),
    ("cat", {"path": "a.txt"},
     ToolResult("Error: there is no tool named 'cat'. Available tools: crash, read, refuse.", True,
                TOOL_NOT_FOUND)),
    ("read", ["a.txt"], ToolResult("Error: arguments for read must be a JSON object, got list.", True,
                                   INVALID_ARGUMENTS)),
    ("read", None, ToolResult("Error: arguments for read must be a JSON object, got NoneType.", True,
                              INVALID_ARGUMENTS)),
    ("read", {"path": "a.txt"},
     ToolResult("Error: invalid arguments for read: (root): 'limit' is a required property", True,
                INVALID_ARGUMENTS)),
    ("read", {"path": "a.txt", "limit": 0},
     ToolResult("Error: invalid arguments for read: limit: 0 is less than the minimum of 1", True,
                INVALID_ARGUMENTS)),
    ("refuse", {"path": "x"}, ToolResult("Error: no such file: x", True, "tool_error")),
    ("crash", {"path": "b"}, ToolResult("Error: crash failed: KeyError: 'b'", True, "KeyError")),
    ("crash", {"path": "a"}, ToolResult("1")),  # results are always text
])
def test_toolbox_call(name: str, args: Any, result: ToolResult) -> None:
    assert BOX.call(name, args) == result


def test_toolbox_reports_every_schema_error_at_once() -> None:
    result = BOX.call("read", {"path": 3, "limit": "ten", "extra": True})
    assert (result.is_error, result.error_type) == (True, INVALID_ARGUMENTS)
    assert "(root): Additional properties are not allowed ('extra' was unexpected)" in result.text
    assert "limit: 'ten' is not of type 'integer'" in result.text
    assert "path: 3 is not of type 'string'" in result.text


def test_toolbox_refuses_duplicate_names_and_bad_schemas() -> None:
    echo = Tool("echo", "Echo.", _strict(text={"type": "string"}), lambda text: text)
    with pytest.raises(ValueError, match="two tools are named 'echo'"):
        Toolbox([echo, echo])
    with pytest.raises(jsonschema.SchemaError):
        Toolbox([Tool("bad", "Bad schema.", {"type": "object", "properties": {"x": {"type": "strange"}}},
                      str)])


def test_toolbox_selection_and_specs() -> None:
    assert "read" in BOX and "cat" not in BOX
    assert [s["name"] for s in BOX.specs()] == ["read", "refuse", "crash"]
    assert BOX.specs()[0] == {"name": "read", "description": "Read a file.",
                              "input_schema": BOX.tools["read"].input_schema}
    assert list(BOX.only(["crash", "nope"]).tools) == ["crash"]
    extra = Tool("echo", "Echo.", _strict(text={"type": "string"}), lambda text: text)
    assert list(BOX.with_tools([extra]).tools) == ["read", "refuse", "crash", "echo"]
    assert "echo" not in BOX  # with_tools makes a new box
