"""The official GenAI instrumentor in the content modes that send log records: one run, as in SPAN_ONLY.

``opentelemetry-instrumentation-openai-v2`` (the `frameworks` extra) records a model call's messages as
OTLP log records tied to its span unless told to put them on the span (``SPAN_ONLY``): the legacy
per-message events (content capture ``true`` without the latest conventions), one
``gen_ai.client.inference.operation.details`` record per call (``EVENT_ONLY``), or both
(``SPAN_AND_EVENT``). The plain OpenAI tool loop of tests/framework_agent.py runs in a child process
with the SDK's real OTLP trace and log exporters (logs batched on their own schedule, so they reach the
receiver after their spans), over HTTP and over gRPC; the store must hold one run whose steps are those
the same loop gives in ``SPAN_ONLY``: the model's text, each tool's name, arguments and result.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.tracer.ingest.otlp import OtlpReceiver

from .conftest import ROOT, python_env, query
from .framework_agent import ANSWER, GENAI_LOG_MODES, TASK, openai_script

pytestmark = pytest.mark.slow

STEPS_SQL = ("SELECT step, thought, tool, args, observation, error_type FROM steps "
             "ORDER BY step, call_index")


def _run(client: str, db: Path, transport: str, env: dict[str, str] | None = None) -> None:
    with ChatCompletionsServer(openai_script()) as chat, \
            OtlpReceiver(db, port=0, grpc_port=0 if transport == "grpc" else None, settle=0) as receiver:
        url = receiver.grpc_url.replace("http://", "grpc://") if transport == "grpc" else receiver.url
        done = subprocess.run([sys.executable, "-m", "tests.framework_agent", client, chat.base_url, url],
                              cwd=ROOT, env={**python_env(), **(env or {})}, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
        receiver.flush()
        assert receiver.stats.logs_received > 0 or client == "openai+genai"


def _steps(db: Path) -> list[tuple[Any, ...]]:
    return [(step, thought, tool, json.loads(args) if args else None, obs, error)
            for step, thought, tool, args, obs, error in query(db, STEPS_SQL)]


@pytest.fixture(scope="module")
def span_only(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Any, ...]]:
    db = tmp_path_factory.mktemp("span_only") / "store.duckdb"
    _run("openai+genai", db, "http")
    return _steps(db)


def test_span_only_is_the_reference(span_only: list[tuple[Any, ...]]) -> None:
    """What the other modes are compared to: four steps, three tool calls with their results, the answer."""
    tools = [(s[2], s[3], s[4]) for s in span_only if s[2] is not None]
    assert [t[:2] for t in tools] == [("read_file", {"path": "a.txt"}), ("delete_everything", {"force": True}),
                                      ("read_file", {"path": "b.txt"})]
    assert tools[0][2] == "contents of a.txt" and tools[2][2] == "contents of b.txt"
    assert span_only[-1][1] == ANSWER


@pytest.mark.parametrize("transport", ["http", "grpc"])
@pytest.mark.parametrize("mode", list(GENAI_LOG_MODES))
def test_a_log_mode_gives_the_run_span_only_gives(mode: str, transport: str, tmp_path: Path,
                                                  span_only: list[tuple[Any, ...]]) -> None:
    db = tmp_path / "store.duckdb"
    _run(f"openai+genai:{mode}", db, transport)
    runs = query(db, "SELECT n_steps, task, answer FROM runs")
    assert runs == [(4, TASK, ANSWER)]
    assert _steps(db) == span_only
    # Every record is kept, and each GenAI event filled its span.
    statuses = dict(query(db, "SELECT status, count(*) FROM log_records GROUP BY ALL"))
    assert set(statuses) == {"joined"} and statuses["joined"] >= 4, statuses
    assert query(db, "SELECT count(*) FROM log_records WHERE run_id IS NULL") == [(0,)]
