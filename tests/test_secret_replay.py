"""A run whose prompt, tool arguments and results held secrets replays identically, offline.

What is stored is redacted, so request identity is computed on the redacted request; a replay
(which rebuilds requests from redacted data) and the replay server (which sees the agent's raw
requests again) both compare after the same redaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.server import MessagesServer
from looptrace.replay.recording import load_recording
from looptrace.replay.replayer import replay
from looptrace.replay.serve import RecordingHandler
from looptrace.tracer import Tracing
from looptrace.tracer.store import Store

from .conftest import query
from .secret_corpus import Planted, corpus, env_for, payload
from .test_secret_paths import CANARY, _fetch, _script


@pytest.fixture
def recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str, list[Planted]]:
    planted = corpus()
    monkeypatch.setenv("ANTHROPIC_API_KEY", planted[0].secret)
    for name, value in env_for(planted).items():
        monkeypatch.setenv(name, value)
    db = tmp_path / "traces.duckdb"
    task = payload(planted, CANARY)
    with MessagesServer(_script(task, planted)) as server, Tracing(db) as tracing:
        model = AnthropicModel("scripted", base_url=server.base_url, retry=RetryPolicy(base_delay=0.01))
        result = Agent(model, [_fetch(planted)], tracing, system=task).run(task)
    assert result.status == "ok" and result.steps == len(planted) + 1
    assert query(db, "SELECT count(*) FROM redactions WHERE record = 'llm_call_records'") != [(0,)]
    return db, result.run_id, planted


def test_a_run_with_redactions_replays_identically(recorded: tuple[Path, str, list[Planted]]) -> None:
    db, run_id, planted = recorded
    recording = load_recording(Store(db), run_id)
    assert planted[0].secret not in recording.config["system"]  # what is replayed is redacted
    with Tracing(db) as tracing:
        report = replay(recording, tracing, live_tools=[])
    assert report.model.drift is None, report.model.drift
    assert report.identical and report.result.steps == len(planted) + 1


def test_the_replay_server_matches_the_agent_s_raw_requests(recorded: tuple[Path, str, list[Planted]]) -> None:
    db, run_id, planted = recorded
    handler = RecordingHandler(load_recording(Store(db), run_id))
    task = payload(planted, CANARY)
    with MessagesServer(handler) as server, Tracing(None) as tracing:
        model = AnthropicModel("scripted", base_url=server.base_url, retry=RetryPolicy(base_delay=0.01))
        result = Agent(model, [_fetch(planted)], tracing, system=task).run(task)
    assert handler.drifts == []
    assert result.status == "ok" and result.steps == len(planted) + 1
    assert handler.served == len(planted) + 1
