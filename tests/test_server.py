"""The scripted Messages API server, driven through the real `anthropic` SDK over loopback."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, MessageParam, ToolParam

from looptrace.loop.server import Disconnect, Fault, MessagesServer, Reply, StreamError

MODEL = "claude-test"
USER: list[MessageParam] = [{"role": "user", "content": "What is 2 + 3?"}]
TOOLS: list[ToolParam] = [
    {
        "name": "calculator",
        "description": "Evaluate an arithmetic expression.",
        "input_schema": {"type": "object", "properties": {"expression": {"type": "string"}}},
    }
]
TEXT = {"type": "text", "text": "Let me work that out with the calculator tool."}
TOOL_USE = {
    "type": "tool_use",
    "id": "toolu_01",
    "name": "calculator",
    "input": {"expression": "2 + 3", "options": {"precision": 2, "steps": [1, "two", None]}},
}
HELLO = Reply([{"type": "text", "text": "Hello!"}])


def client(server: MessagesServer, **options: Any) -> anthropic.Anthropic:
    options.setdefault("max_retries", 0)
    return anthropic.Anthropic(api_key="test", base_url=server.base_url, **options)


def create(sdk: anthropic.Anthropic, **extra: Any) -> Message:
    message = sdk.messages.create(model=MODEL, max_tokens=64, messages=USER, **extra)
    assert isinstance(message, Message)
    return message


def text_of(message: Message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@pytest.fixture
def hello_server() -> Iterator[MessagesServer]:
    with MessagesServer(lambda body: HELLO) as server:
        yield server


def test_text_reply(hello_server: MessagesServer) -> None:
    message = create(client(hello_server))
    assert [block.type for block in message.content] == ["text"]
    assert text_of(message) == "Hello!"
    assert (message.role, message.stop_reason, message.stop_sequence) == ("assistant", "end_turn", None)
    assert message.model == MODEL
    assert message.id == "msg_000000000000000000000001"


def test_tool_use_input_round_trips() -> None:
    with MessagesServer([Reply([TEXT, TOOL_USE], stop_reason="tool_use", model="claude-other")]) as server:
        message = create(client(server), tools=TOOLS)
    assert message.stop_reason == "tool_use"
    assert message.model == "claude-other"
    block = message.content[1]
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_01", "calculator", TOOL_USE["input"])


def test_stream_helper_rebuilds_the_non_streaming_message() -> None:
    reply = Reply([TEXT, TOOL_USE], stop_reason="tool_use")
    with MessagesServer(lambda body: reply) as server:
        sdk = client(server)
        plain = create(sdk, tools=TOOLS)
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=USER, tools=TOOLS) as stream:
            streamed_text = "".join(stream.text_stream)
            final = stream.get_final_message()
    assert streamed_text == TEXT["text"]
    assert [block.to_dict() for block in final.content] == [block.to_dict() for block in plain.content]
    assert (final.stop_reason, final.model) == (plain.stop_reason, plain.model)
    assert final.usage.to_dict() == plain.usage.to_dict()


def test_create_stream_yields_the_api_event_sequence() -> None:
    with MessagesServer([Reply([TEXT, TOOL_USE], stop_reason="tool_use")]) as server:
        sdk = client(server)
        stream = sdk.messages.create(model=MODEL, max_tokens=64, messages=USER, stream=True)
        events: list[dict[str, Any]] = [event.to_dict() for event in stream]
    block = ["content_block_start", *["content_block_delta"] * 3, "content_block_stop"]
    assert [event["type"] for event in events] == [
        "message_start",
        *block,
        *block,
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"]["content"] == [] and events[0]["message"]["stop_reason"] is None
    assert [event["delta"]["type"] for event in events[2:5]] == ["text_delta"] * 3
    assert "".join(event["delta"]["text"] for event in events[2:5]) == TEXT["text"]
    assert events[6]["content_block"] == {**TOOL_USE, "input": {}}
    assert [event["delta"]["type"] for event in events[7:10]] == ["input_json_delta"] * 3
    assert json.loads("".join(event["delta"]["partial_json"] for event in events[7:10])) == TOOL_USE["input"]
    assert events[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_overloaded_then_reply_succeeds_on_retry() -> None:
    with MessagesServer([Fault(529), HELLO]) as server:
        message = create(client(server, max_retries=2))
    assert text_of(message) == "Hello!"
    assert [request["headers"]["x-stainless-retry-count"] for request in server.requests] == ["0", "1"]


@pytest.mark.slow
def test_rate_limit_retry_waits_for_retry_after() -> None:
    # A lower bound, so a loaded machine cannot make it fail: the SDK's own first backoff is under 0.5 s,
    # so a retry 5 s later can only come from the header. (`make bench` times a short retry-after.)
    with MessagesServer([Fault(429, "rate_limit_error", retry_after=5), HELLO]) as server:
        started = time.monotonic()
        create(client(server, max_retries=1))
        elapsed = time.monotonic() - started
    assert len(server.requests) == 2
    assert elapsed >= 5


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        (Fault(400, "invalid_request_error", "bad"), anthropic.BadRequestError),
        (Fault(429, "rate_limit_error", "slow down"), anthropic.RateLimitError),
        (Fault(500, "api_error", "boom"), anthropic.InternalServerError),
        (Fault(503, "api_error", "down"), anthropic.ServiceUnavailableError),
        (Fault(529, "overloaded_error", "busy"), anthropic.OverloadedError),
        (StreamError(), anthropic.OverloadedError),  # outside a stream it is a plain 529
    ],
)
def test_fault_raises_the_sdk_error_for_its_status(
    fault: Fault | StreamError, error: type[Exception]
) -> None:
    with MessagesServer([fault]) as server, pytest.raises(anthropic.APIStatusError) as caught:
        create(client(server))
    assert type(caught.value) is error
    expected_type = fault.error_type if isinstance(fault, Fault) else "overloaded_error"
    assert caught.value.type == expected_type
    assert caught.value.request_id == "req_000000000000000000000001"
    assert len(server.requests) == 1


def test_stream_error_mid_stream_raises_after_partial_text() -> None:
    received: list[str] = []
    with MessagesServer([StreamError(after_text="half an ans")]) as server:
        sdk = client(server)
        stream_manager = sdk.messages.stream(model=MODEL, max_tokens=64, messages=USER)
        with pytest.raises(anthropic.APIStatusError) as caught, stream_manager as stream:
            received.extend(stream.text_stream)
    # Headers already said 200, so the SDK cannot pick a status subclass: it raises the base class.
    assert type(caught.value) is anthropic.APIStatusError
    assert (caught.value.status_code, caught.value.type) == (200, "overloaded_error")
    assert "".join(received) == "half an ans"


def test_disconnect_raises_connection_error() -> None:
    with MessagesServer([HELLO, Disconnect()]) as server:
        sdk = client(server)
        create(sdk)  # the reset then hits a reused keep-alive connection, as in production
        with pytest.raises(anthropic.APIConnectionError) as caught:
            create(sdk)
    assert type(caught.value) is anthropic.APIConnectionError
    assert "reset" in repr(caught.value.__cause__).lower()


def test_slow_reply_past_client_timeout_raises_timeout() -> None:
    server = MessagesServer([Reply(HELLO.content, delay=1.0)])
    with server, pytest.raises(anthropic.APITimeoutError):
        create(client(server, timeout=0.2))


def test_exhausted_script_answers_500_and_is_not_retried() -> None:
    with MessagesServer([HELLO]) as server:
        sdk = client(server, max_retries=2)
        create(sdk)
        with pytest.raises(anthropic.InternalServerError) as caught:
            create(sdk)
    assert caught.value.api_message == "script exhausted after 1 responses"
    assert len(server.requests) == 2


def test_handler_sees_the_request_body() -> None:
    seen: list[dict[str, Any]] = []

    def handler(body: dict[str, Any]) -> Reply:
        seen.append(body)
        return HELLO

    with MessagesServer(handler) as server:
        create(client(server), system="Be brief.", tools=TOOLS)
    assert seen[0]["model"] == MODEL
    assert seen[0]["messages"] == USER
    assert seen[0]["tools"] == TOOLS
    assert seen[0]["system"] == "Be brief."
    assert server.requests[0]["body"] == seen[0]


def test_handler_errors_surface_in_the_sdk_error() -> None:
    def handler(body: dict[str, Any]) -> Reply:
        raise KeyError("no such turn")

    with MessagesServer(handler) as server, pytest.raises(anthropic.InternalServerError) as caught:
        create(client(server, max_retries=2))
    assert "KeyError" in str(caught.value.api_message)
    assert len(server.requests) == 1


@pytest.mark.slow
def test_parallel_requests_are_all_answered() -> None:
    def echo(body: dict[str, Any]) -> Reply:
        return Reply([{"type": "text", "text": f"echo {body['messages'][0]['content']}"}], delay=2.0)

    answers: dict[int, str] = {}
    with MessagesServer(echo) as server:
        sdk = client(server)

        def ask(n: int) -> None:
            message = sdk.messages.create(
                model=MODEL, max_tokens=8, messages=[{"role": "user", "content": f"{n}"}]
            )
            answers[n] = text_of(message)

        # Daemon threads joined with a timeout: a server that answers in turn fails this test, never hangs it.
        threads = [threading.Thread(target=ask, args=(n,), daemon=True) for n in range(8)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(max(0.0, started + 60 - time.monotonic()))
        elapsed = time.monotonic() - started
    assert answers == {n: f"echo {n}" for n in range(8)}
    assert len(server.requests) == 8
    # In turn, the eight 2 s delays take 16 s; overlapped, about 2 s. 8 s leaves a loaded machine 6 s of
    # slack either way. (`make bench` prints the parallel / sequential ratio.)
    assert elapsed < 8


def test_usage_is_estimated_from_characters() -> None:
    with MessagesServer([Reply([TEXT, TOOL_USE], stop_reason="tool_use")]) as server:
        usage = create(client(server), system="Be brief.", tools=TOOLS).usage
    prompt_chars = sum(len(compact_json(part)) for part in ("Be brief.", USER, TOOLS))
    output_chars = len(TEXT["text"]) + len(compact_json(TOOL_USE["input"]))
    assert usage.input_tokens == math.ceil(prompt_chars / 4)
    assert usage.output_tokens == math.ceil(output_chars / 4)
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


def test_given_usage_overrides_only_its_keys() -> None:
    reply = Reply(HELLO.content, usage={"output_tokens": 7, "cache_read_input_tokens": 100})
    with MessagesServer([reply, reply]) as server:
        sdk = client(server)
        plain = create(sdk).usage
        with sdk.messages.stream(model=MODEL, max_tokens=64, messages=USER) as stream:
            streamed = stream.get_final_message().usage
    assert (plain.output_tokens, plain.cache_read_input_tokens) == (7, 100)
    assert plain.input_tokens > 0
    assert streamed.to_dict() == plain.to_dict()


def test_count_tokens_uses_the_same_estimate(hello_server: MessagesServer) -> None:
    sdk = client(hello_server)
    counted = sdk.messages.count_tokens(model=MODEL, messages=USER, system="Be brief.", tools=TOOLS)
    assert counted.input_tokens == create(sdk, system="Be brief.", tools=TOOLS).usage.input_tokens
    assert create(sdk).id == "msg_000000000000000000000002"  # counting consumed no message


def test_request_log_keeps_lowercase_headers(hello_server: MessagesServer) -> None:
    create(client(hello_server))
    request = hello_server.requests[0]
    assert request["path"] == "/v1/messages"
    assert all(name == name.lower() for name in request["headers"])
    # anthropic 2.16 sends the API key as a bearer token, not as x-api-key.
    assert request["headers"]["authorization"] == "Bearer test"
    assert "anthropic-version" in request["headers"]


def _raw_post(url: str, data: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(url, data=data, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status, dict(response.headers), json.load(response)
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.load(err)


def test_unknown_path_and_malformed_json_get_api_shaped_errors(hello_server: MessagesServer) -> None:
    status, headers, body = _raw_post(hello_server.base_url + "/v1/complete", b"{}")
    assert status == 404 and body["type"] == "error" and body["error"]["type"] == "not_found_error"
    assert headers["request-id"] == "req_000000000000000000000001"
    status, headers, body = _raw_post(hello_server.base_url + "/v1/messages", b'{"model": ')
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("malformed JSON body")
    assert headers["request-id"] == "req_000000000000000000000002"


def test_async_client_creates_and_streams() -> None:
    async def run(server: MessagesServer) -> tuple[str, str]:
        async with anthropic.AsyncAnthropic(api_key="test", base_url=server.base_url, max_retries=0) as sdk:
            plain = await sdk.messages.create(model=MODEL, max_tokens=64, messages=USER)
            async with sdk.messages.stream(model=MODEL, max_tokens=64, messages=USER) as stream:
                final = await stream.get_final_message()
        return text_of(plain), text_of(final)

    with MessagesServer([Reply([TEXT]), Reply([TEXT])]) as server:
        assert asyncio.run(run(server)) == (TEXT["text"], TEXT["text"])


def test_stop_closes_idle_keep_alive_connections() -> None:
    server = MessagesServer(lambda body: HELLO).start()
    sdk = client(server)
    create(sdk)
    server.stop()
    with pytest.raises(anthropic.APIConnectionError):
        create(sdk)


def test_content_blocks_need_a_type() -> None:
    with pytest.raises(ValueError, match="type"):
        Reply([{"text": "untyped"}])
