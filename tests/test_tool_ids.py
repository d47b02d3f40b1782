"""Tool-call ids: the bundled servers send real-shaped ones, and the instrumentor pairs without them.

The first trace a user makes is the README's instrumented loop against the bundled server; when that
server sent ``id: ''`` the instrumentor (joining results to calls by id alone) stored an empty
observation. Both halves are held here: ids from the servers, and pairing by order when ids are absent.
"""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import anthropic
import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.loop.scripted import act, acts
from looptrace.loop.server import MessagesServer
from looptrace.tracer.spans.anthropic import pair_results


def test_the_messages_server_sends_toolu_ids_through_the_sdk() -> None:
    with MessagesServer([acts([("read", {"path": "a"}), ("read", {"path": "b"})]), act("read", {"path": "c"})]) as s:
        client = anthropic.Anthropic(base_url=s.base_url, api_key="offline", max_retries=0)
        first = client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as st:
            second = st.get_final_message()
    ids = [b.id for b in first.content + second.content if b.type == "tool_use"]
    assert len(ids) == 3 and len(set(ids)) == 3
    assert all(i.startswith("toolu_") and len(i) > 20 for i in ids), ids


def test_the_chat_server_sends_call_ids_where_the_script_has_none() -> None:
    def script(body: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": [{"name": "read", "arguments": "{}"}, {"id": "mine", "name": "read", "arguments": "{}"}]}

    with ChatCompletionsServer(script) as chat:
        request = urllib.request.Request(chat.base_url + "/chat/completions", method="POST",
                                         data=json.dumps({"model": "m", "messages": []}).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.load(response)
    [generated, kept] = [c["id"] for c in body["choices"][0]["message"]["tool_calls"]]
    assert generated.startswith("call_") and len(generated) > 20
    assert kept == "mine"


def _results(*blocks: tuple[str | None, str]) -> list[dict[str, Any]]:
    content = [{"type": "tool_result", "content": text, **({"tool_use_id": i} if i is not None else {})}
               for i, text in blocks]
    return [{"role": "user", "content": content}]


@pytest.mark.parametrize(("use_ids", "blocks", "expected"), [
    # by id, whatever the order of the results
    (["t1", "t2"], [("t2", "two"), ("t1", "one")], [("t1", "one", False), ("t2", "two", False)]),
    # no ids on either side: by position within the turn
    (["", ""], [("", "one"), (None, "two")], [("", "one", False), ("", "two", False)]),
    # calls without ids, results with ids: by position, and the result's id is kept
    (["", ""], [("r1", "one"), ("r2", "two")], [("r1", "one", False), ("r2", "two", False)]),
    # one call with an id, one without: the id-less call does not take the other's result
    (["t1", ""], [("t1", "one"), ("", "two")], [("t1", "one", False), ("", "two", False)]),
    (["", "t2"], [("t2", "two")], [("", "", False), ("t2", "two", False)]),
    # fewer results than calls: the missing one is empty, not an exception
    (["", ""], [("", "one")], [("", "one", False), ("", "", False)]),
])
def test_results_pair_by_id_then_by_order(use_ids: list[str], blocks: list[tuple[str | None, str]],
                                          expected: list[tuple[str, str, bool]]) -> None:
    assert pair_results(use_ids, _results(*blocks)) == expected


def test_pairing_reads_only_user_turns_and_keeps_errors() -> None:
    messages = [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "", "content": "no"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "", "is_error": True,
                                              "content": [{"type": "text", "text": "boom"}]}]}]
    assert pair_results([""], messages) == [("", "boom", True)]
