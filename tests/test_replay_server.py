"""A recorded run served as the Messages API (``RecordingHandler``, ``looptrace serve``), driven by
the real ``anthropic`` SDK and by a plain HTTP client reading the SSE stream itself."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import pytest

from looptrace.loop.demo import run_scenarios
from looptrace.loop.scenarios import SCENARIOS
from looptrace.loop.server import MessagesServer
from looptrace.replay.recording import Recording, load_recording
from looptrace.replay.serve import RecordingHandler
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Recording]]:
    db = tmp_path_factory.mktemp("serve") / "store.duckdb"
    results = run_scenarios(db, [s for s in SCENARIOS if s.name in ("healthy", "context-overflow")])
    return db, {s.name: load_recording(Store(db), r.run_id) for s, r in results}


def client(base_url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base_url, api_key="offline", max_retries=0)


def as_recorded(message: anthropic.types.Message) -> dict[str, Any]:
    """A response as the loop records it, without its id (the server numbers its own messages)."""
    return {k: v for k, v in message.model_dump(mode="json", exclude_none=True).items() if k != "id"}


def without_id(response: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (response or {}).items() if k != "id"}


def test_the_sdk_gets_the_recorded_responses_in_order(recorded: tuple[Path, dict[str, Recording]]) -> None:
    recording = recorded[1]["healthy"]
    handler = RecordingHandler(recording)
    with MessagesServer(handler) as server:
        sdk = client(server.base_url)
        for i, call in enumerate(recording.calls):
            if i % 2:
                with sdk.messages.stream(**call.request) as stream:
                    message = stream.get_final_message()
            else:
                message = sdk.messages.create(**call.request)
            assert as_recorded(message) == without_id(call.response), f"call {i + 1}"
        with pytest.raises(anthropic.BadRequestError, match="the recording has only 3 model calls"):
            sdk.messages.create(**recording.calls[-1].request)
    assert handler.served == len(recording.calls) == 3 and handler.drifts == []


def test_a_recorded_failure_is_served_as_its_error(recorded: tuple[Path, dict[str, Recording]]) -> None:
    recording = recorded[1]["context-overflow"]
    with MessagesServer(RecordingHandler(recording)) as server:
        sdk = client(server.base_url)
        for call in recording.calls[:-1]:
            assert as_recorded(sdk.messages.create(**call.request)) == without_id(call.response)
        with pytest.raises(anthropic.BadRequestError, match="prompt is too long") as failure:
            sdk.messages.create(**recording.calls[-1].request)
    assert failure.value.status_code == 400


def sse(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event, data) pairs of a text/event-stream body."""
    events = []
    for frame in body.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_a_plain_http_client_streams_the_recorded_response(
    recorded: tuple[Path, dict[str, Recording]],
) -> None:
    recording = recorded[1]["healthy"]
    call = recording.calls[0]
    assert call.response is not None
    with MessagesServer(RecordingHandler(recording)) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        headers = {"content-type": "application/json", "x-api-key": "offline",
                   "anthropic-version": "2023-06-01"}
        conn.request("POST", "/v1/messages", json.dumps({**call.request, "stream": True}), headers)
        response = conn.getresponse()
        body = response.read()
        conn.close()
    assert response.status == 200
    assert response.getheader("content-type", "").startswith("text/event-stream")
    events = sse(body)
    names = [name for name, _ in events]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert {"content_block_start", "content_block_delta", "content_block_stop"} <= set(names)
    # The deltas add up to the recorded content, block by block.
    text: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_delta":
            delta = data["delta"]
            part = delta.get("text", delta.get("partial_json", ""))
            text[data["index"]] = text.get(data["index"], "") + part
    rebuilt = [b["text"] if b["type"] == "text" else json.dumps(b["input"], separators=(",", ":"))
               for b in call.response["content"]]
    assert [text[i] for i in sorted(text)] == rebuilt
    [stop] = [data for name, data in events if name == "message_delta"]
    assert stop["delta"]["stop_reason"] == call.response["stop_reason"]


def edited_tool_result(request: dict[str, Any]) -> dict[str, Any]:
    """``request`` with the content of its last tool result replaced."""
    messages = json.loads(json.dumps(request["messages"]))
    messages[-1]["content"][0]["content"] = "nothing here"
    return {**request, "messages": messages}


def test_a_drifted_request_gets_400_naming_the_step_and_the_difference(
    recorded: tuple[Path, dict[str, Recording]],
) -> None:
    recording = recorded[1]["healthy"]
    first, second = recording.calls[0], recording.calls[1]
    handler = RecordingHandler(recording)
    with MessagesServer(handler) as server:
        sdk = client(server.base_url)
        sdk.messages.create(**first.request)
        with pytest.raises(anthropic.BadRequestError) as drifted:
            sdk.messages.create(**edited_tool_result(second.request))
        message = drifted.value.body["error"]["message"]  # type: ignore[index]
        assert drifted.value.status_code == 400
        assert message.startswith("looptrace replay: request 2 (step 2) drifted from the recording: "
                                  "message 3 (user) changed")
        assert '+   "content": "nothing here"' in message
        # The drifted request did not use up the recording: the right one still gets its response.
        assert as_recorded(sdk.messages.create(**second.request)) == without_id(second.response)
        system_changed = r"request 3 \(step 3\) drifted from the recording: the system prompt changed"
        with pytest.raises(anthropic.BadRequestError, match=system_changed):
            sdk.messages.create(**{**recording.calls[2].request, "system": "Be terse."})
    assert len(handler.drifts) == 2


def test_a_lenient_server_answers_a_drifted_request_with_the_next_response(
    recorded: tuple[Path, dict[str, Recording]], caplog: pytest.LogCaptureFixture,
) -> None:
    recording = recorded[1]["healthy"]
    handler = RecordingHandler(recording, lenient=True)
    with caplog.at_level(logging.WARNING, logger="looptrace.serve"), MessagesServer(handler) as server:
        sdk = client(server.base_url)
        sdk.messages.create(**recording.calls[0].request)
        answer = sdk.messages.create(**edited_tool_result(recording.calls[1].request))
    assert as_recorded(answer) == without_id(recording.calls[1].response)
    assert handler.drifts == [] and handler.served == 2
    warnings = [r.getMessage() for r in caplog.records]
    assert any("request 2 (step 2) drifted" in w and "(lenient: serving the recorded response)" in w
               for w in warnings)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_the_serve_command_answers_the_sdk(recorded: tuple[Path, dict[str, Recording]]) -> None:
    db, recordings = recorded
    recording = recordings["healthy"]
    port = free_port()
    env = {k: v for k, v in python_env().items() if k != "ANTHROPIC_API_KEY"}
    command = [PYTHON, "-m", "looptrace.tracer.cli", "serve", recording.run_id[:8], "--port", str(port),
               "--db", str(db)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT)
    try:
        assert proc.stdout is not None
        with ThreadPoolExecutor(1) as pool:
            line = pool.submit(proc.stdout.readline).result(timeout=30)
        expected = f"serving run {recording.run_id} (3 model calls) at http://127.0.0.1:{port}"
        assert line.startswith(expected), line
        message = client(f"http://127.0.0.1:{port}").messages.create(**recording.calls[0].request)
        assert as_recorded(message) == without_id(recording.calls[0].response)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err, err
