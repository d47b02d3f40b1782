"""Incremental request hashing must give exactly the hashes of hashing every request whole."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from looptrace.tracer.records.digests import ConversationDigest, content_sha
from looptrace.tracer.records.requests import RequestLog, overlap

SYSTEM = "You are a careful agent. ünïcode"
TOOLS = [{"name": "read_file", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]


def _turn(i: int) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "read_file",
                                           "input": {"path": f"f{i}.py", "n": i, "x": 0.5}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": f"body {i} é"}]},
    ]


def _conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for i in range(turns):
        messages += _turn(i)
    return messages


def _request(messages: Any, **extra: Any) -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "tools": TOOLS,
            "messages": messages, **extra}


def _expected(request: dict[str, Any]) -> tuple[list[str], str | None, str | None, str]:
    return ([content_sha(m) for m in request["messages"]], content_sha(request["system"]) if "system" in request
            else None, content_sha(request["tools"]) if "tools" in request else None, content_sha(request))


def _got(digest: ConversationDigest, request: dict[str, Any]) -> tuple[list[str], str | None, str | None, str]:
    d = digest.digest(request)
    return d.message_shas, d.system_sha, d.tools_sha, d.request_sha


def test_a_growing_conversation_reuses_its_prefix_and_hashes_as_whole() -> None:
    digest = ConversationDigest()
    messages = _conversation(0)
    for turn in range(12):
        request = _request(messages)
        d = digest.digest(request)
        assert (d.message_shas, d.system_sha, d.tools_sha, d.request_sha) == _expected(request)
        assert d.kept == (0 if turn == 0 else len(messages) - 2)  # only the two new messages were hashed
        messages = messages + _turn(turn)  # a new list, the same message objects, as agents do


def _mutate_earlier(m: list[dict[str, Any]]) -> None:
    m[1]["content"][0]["input"]["path"] = "other.py"


def _append_block(m: list[dict[str, Any]]) -> None:
    m[-1]["content"].append({"type": "text", "text": "cache me", "cache_control": {"type": "ephemeral"}})


def _int_to_float(m: list[dict[str, Any]]) -> None:
    m[1]["content"][0]["input"] = {"path": "f0.py", "n": 0, "x": 0.5, "y": None}


@pytest.mark.parametrize("change", [_mutate_earlier, _append_block, _int_to_float, lambda m: m.pop(),
                                    lambda m: m.__setitem__(0, {"role": "user", "content": "another task"})])
def test_messages_changed_in_place_are_hashed_again(change: Any) -> None:
    digest = ConversationDigest()
    messages = _conversation(3)
    digest.digest(_request(messages))
    change(messages)  # the same objects, edited after the first call
    request = _request(messages + _turn(9))
    assert _got(digest, request) == _expected(request)


def test_a_sliding_window_reuses_its_messages_and_hashes_as_whole() -> None:
    """An agent that keeps the last few messages resends the same objects at other places: each is
    reused only while it still equals what was hashed, so one changed in place is hashed again."""
    digest = ConversationDigest()
    history = _conversation(12)
    for step in range(8):
        window = history[step * 2:step * 2 + 9]
        request = _request(window)
        assert _got(digest, request) == _expected(request)
        reused = {id(m) for m in digest._messages}  # noqa: SLF001 - the reuse is what is tested
        if step:
            # Both windows hold 7 messages; the 2 changed below are serialised again, the other 5 are not.
            assert len(reused & before) == 5
        before = reused
        window[-1]["content"][0]["content"] = f"changed {step}"  # in place: seen again next time
        history[step * 2 + 3]["role"] = "user"  # was "assistant"


@pytest.mark.parametrize("request_", [
    _request(tuple(_conversation(2))),
    _request(_conversation(2), max_tokens=77, temperature=0.2, metadata={"user_id": "u"}),
    {"model": "m", "messages": _conversation(2)},  # no system, no tools
    {"model": "m", "messages": []},
    _request([{"role": "user", "content": "bad \udcff surrogate"}, {"role": "user", "content": b"\xff bytes"}]),
    _request([{"role": "user", "content": [{"type": "text", "text": float("nan")}]}]),
    # Keys that are not text, nested tuples, a set: JSON reads them back differently, so the slow path.
    _request([{"role": "user", "content": [{"type": "text", "text": "k", True: 1, None: 2, 3: (4, 5)}]},
              {"role": "user", "content": [{"type": "text", "text": "s", "tags": {"b"}}]},
              {"role": "user", "content": [{"type": "text", "text": "m", "meta": {True: 1}, "more": {None: [1.5]}}]}]),
])
def test_unusual_requests_hash_as_whole(request_: dict[str, Any]) -> None:
    digest = ConversationDigest()
    digest.digest(_request(_conversation(2)))  # a different earlier request: nothing stale may leak
    assert _got(digest, request_) == _expected(request_)
    assert _got(digest, request_) == _expected(request_)  # and again, from what it remembered


def test_changing_parameters_or_system_between_calls() -> None:
    digest = ConversationDigest()
    messages = _conversation(2)
    for request in (_request(messages), _request(messages + _turn(5), max_tokens=9),
                    _request(messages + _turn(5), system="new system"),
                    {**_request(messages + _turn(5) + _turn(6)), "tools": TOOLS + TOOLS}):
        assert _got(digest, request) == _expected(request)


def test_request_log_records_the_same_deltas_and_hashes() -> None:
    log = RequestLog()
    messages = _conversation(1)
    first = log.encode(_request(messages), "c1")
    second = log.encode(_request(messages + _turn(1)), "c2")
    assert (first.keep, first.base_call_id, second.keep, second.base_call_id) == (0, None, 3, "c1")
    assert second.append == _turn(1) and second.system is None and first.system == SYSTEM
    assert second.request_sha == content_sha(_request(messages + _turn(1)))
    assert first.system_sha == content_sha(SYSTEM) and second.tools_sha == content_sha(copy.deepcopy(TOOLS))


@pytest.mark.parametrize("same", [False, True], ids=["value", "value_or_same"])
def test_redacted_identity_follows_changed_parameters(same: bool) -> None:
    """The parameters are redacted once while they stay equal; a change (here a secret added to the
    system prompt, then a new limit) must give the identity of the whole request redacted anew."""
    from looptrace.tracer.sink import Redactor

    redactor = Redactor(env={})
    # ``value_or_same`` (what Tracing gives a run): a message it leaves alone is hashed once, for both digests.
    log = RequestLog(redact=redactor.value_or_same if same else redactor.value)
    messages = _conversation(1)
    for i, request in enumerate((_request(messages), _request(messages + _turn(1)),
                                 _request(messages + _turn(1), system="key sk-ant-abcdefghijklmnop"),
                                 _request(messages + _turn(2), system="key sk-ant-abcdefghijklmnop", max_tokens=7))):
        encoded = log.encode(request, f"c{i}")
        assert encoded.request_sha == content_sha(redactor.value(copy.deepcopy(request)))
    assert "sk-ant-abcdefghijklmnop" not in repr(redactor.value(_request([], system="sk-ant-abcdefghijklmnop")))


@pytest.mark.parametrize("same", [False, True], ids=["value", "value_or_same"])
def test_replay_identity_is_the_whole_redacted_request_and_sees_an_earlier_message_change(same: bool) -> None:
    """``identity`` (what replay compares, a message redacted once per run) must equal hashing the
    whole request redacted, call after call, and must see a change to a message already seen: an
    edited early tool result is drift, not a cache hit."""
    from looptrace.tracer.sink import Redactor

    redactor = Redactor(env={})
    # ``value_or_same`` (what Tracing gives a run): a message it leaves alone is hashed once, for both digests.
    log = RequestLog(redact=redactor.value_or_same if same else redactor.value)
    messages = _conversation(1) + [{"role": "user", "content": "token sk-ant-abcdefghijklmnop"}]
    for turn in range(2, 6):
        request = _request(messages)
        assert log.identity(request) == content_sha(redactor.value(copy.deepcopy(request)))
        messages = messages + _turn(turn)
    edited = copy.deepcopy(messages)
    _mutate_earlier(edited)
    assert log.identity(_request(edited)) == content_sha(redactor.value(copy.deepcopy(_request(edited))))
    assert log.identity(_request(edited)) != log.identity(_request(messages))


@pytest.mark.parametrize(("last", "new", "expected"), [
    ([], list("ab"), (0, 0)),
    (list("abc"), list("abcde"), (0, 3)),  # the whole history resent and extended
    (list("abcdef"), list("cdefgh"), (2, 4)),  # a window: the two oldest fell out
    (list("abcdef"), list("xcdef"), (0, 0)),  # a summary replaced the front: the rest is not after it
    (list("abab"), list("abx"), (0, 2)),  # equal keeps: the smallest drop
    (list("aab"), list("abz"), (1, 2)),  # a repeated message: the drop that keeps the most
    (list("abcd"), list("bxcd"), (1, 1)),
    (list("abc"), [], (0, 0)),
])
def test_overlap_keeps_the_most_of_the_last_request(last: list[str], new: list[str], expected: tuple[int, int]) -> None:
    assert overlap(last, new) == expected


def test_a_window_of_the_history_stores_only_what_each_call_adds() -> None:
    log = RequestLog()
    history = _conversation(3)
    encoded = [log.encode(_request(history[-4:]), "c0")]
    for turn in range(3, 6):
        history = history + _turn(turn)
        encoded.append(log.encode(_request(history[-4:]), f"c{turn}"))
    assert [(e.drop, e.keep, len(e.append), e.base_call_id) for e in encoded] == [
        (0, 0, 4, None), (2, 2, 2, "c0"), (2, 2, 2, "c3"), (2, 2, 2, "c4")]


@pytest.mark.parametrize("redact", ["none", "value", "value_or_same"])
def test_hashes_handed_on_to_encode_give_the_same_records(redact: str) -> None:
    """The instrumentor's path (``extension_shas`` to find the run, then ``encode`` of the same request,
    which takes those hashes and compares the history no further) records exactly what ``encode`` alone
    records, through the changes that must be seen: a message edited in place between calls, a secret,
    a request the guard extends with a turn (new objects), a hash handed out and never encoded."""
    from looptrace.tracer.sink import Redactor

    redactor = Redactor(env={})
    fn = None if redact == "none" else redactor.value if redact == "value" else redactor.value_or_same
    handed, alone = RequestLog(fn), RequestLog(fn)
    messages = _conversation(1) + [{"role": "user", "content": "token sk-ant-abcdefghijklmnop"}]
    n = 0
    for turn in range(2, 12):
        request = _request(messages)
        if turn == 5:
            _mutate_earlier(messages)  # in place, after the last call: the next one must see it
        if turn == 7:
            messages[-1]["content"][0]["content"] = "edited"
        if turn == 8:  # handed out, then the request the guard changed is what is encoded
            assert handed.extension_shas(list(messages), n) is not None
            request = _request(messages + [{"role": "user", "content": "reflect"}])
        elif turn == 9:  # handed out and never encoded (the guard stopped it), then a later request
            handed.extension_shas(list(messages), n)
            messages = messages + _turn(turn)
            request = _request(messages)
        elif n:
            shas = handed.extension_shas(list(messages), n)
            assert shas == [content_sha(m) for m in messages] or turn in (5, 7, 9, 10)
        got, want = handed.encode(request, f"c{turn}"), alone.encode(copy.deepcopy(request), f"c{turn}")
        assert got == want, f"turn {turn}"
        n = len(request["messages"])
        messages = messages + _turn(turn)


def test_hashes_handed_out_twice_before_an_encode_are_compared_again() -> None:
    """Two requests hashed before the next ``encode`` (the first never sent): the identity digest is a
    request behind the raw one, so the raw digest's prefix test cannot answer for it."""
    from looptrace.tracer.sink import Redactor

    redactor = Redactor(env={})
    handed, alone = RequestLog(redactor.value_or_same), RequestLog(redactor.value_or_same)
    messages = _conversation(3)
    assert handed.encode(_request(messages), "c1") == alone.encode(_request(messages), "c1")
    other = [messages[0], {"role": "assistant", "content": "another reply"}, *messages[2:], *_turn(7)]
    handed.message_shas(other)  # a request that was never sent
    later = _request(other + _turn(8))
    assert handed.encode(later, "c2") == alone.encode(copy.deepcopy(later), "c2")
    assert handed.encode(later, "c2").request_sha == content_sha(redactor.value(copy.deepcopy(later)))
