"""Conformance: agents on real frameworks and instrumented SDKs come out as one run with the right steps.

Each client (tests/framework_agent.py) runs the scripted conversation against a scripted model server on
127.0.0.1 in its own process and exports OTLP/HTTP to a real receiver; the store must then hold one run of
four steps, the tools, arguments and observations the model saw, the undeclared tool as
``tool_not_found``, and the analyzer must name the hallucinated tool. The packages are the `frameworks`
extra of pyproject.toml, installed by the Makefile.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from looptrace.loop.openai_server import ChatCompletionsServer
from looptrace.loop.server import MessagesServer
from looptrace.replay.analyzer import DEFAULT_THRESHOLDS, analyze_store
from looptrace.tracer import Tracing
from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.spans.anthropic import AnthropicInstrumentor
from looptrace.tracer.store import Store

from .conftest import ROOT, python_env, query
from .framework_agent import ANSWER, CLIENTS, anthropic_script, openai_script, plain_anthropic

pytestmark = pytest.mark.slow

ONE_IS_ENOUGH = replace(DEFAULT_THRESHOLDS, hallucination_min=1, hallucination_share=0.0)
EXPECTED = [
    (1, "read_file", {"path": "a.txt"}, "contents of a.txt", None),
    (2, "delete_everything", {"force": True}, None, "tool_not_found"),  # the framework's own words: not compared
    (3, "read_file", {"path": "b.txt"}, "contents of b.txt", None),
]


# OpenLLMetry's openai-agents instrumentor records requests but not responses: the last answer is nowhere.
ANSWERS = {"openai-agents+openllmetry": None}
# smolagents answers with its end tool, whose call is the last step's (tracer/ingest/otlp/steps.py).
FINAL_CALL = (4, "final_answer", {"answer": ANSWER}, ANSWER, None)


def run_client(client: str, db: Path) -> None:
    final_tool = "final_answer" if client.startswith("smolagents") else None
    with ChatCompletionsServer(openai_script(final_tool)) as chat, MessagesServer(anthropic_script) as messages, \
            OtlpReceiver(db, port=0, settle=0) as receiver:
        url = messages.base_url if client.startswith("anthropic") else chat.base_url
        done = subprocess.run([sys.executable, "-m", "tests.framework_agent", client, url, receiver.url],
                              cwd=ROOT, env=python_env(), capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
        receiver.flush()


def run_own_instrumentor(db: Path) -> None:
    """The eleventh client: the same bare Anthropic loop under looptrace's own instrumentor (in process)."""
    tracing = Tracing(db)
    instrumentor = AnthropicInstrumentor(tracing).instrument()
    try:
        with MessagesServer(anthropic_script) as messages:
            plain_anthropic(messages.base_url)
    finally:
        instrumentor.uninstrument()
        tracing.shutdown()


@pytest.mark.parametrize("client", [*CLIENTS, "anthropic+looptrace"])
def test_client_is_one_run_of_four_steps(client: str, tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    if client == "anthropic+looptrace":
        run_own_instrumentor(db)
    else:
        run_client(client, db)
    runs = query(db, "SELECT run_id, n_steps, answer FROM runs")
    assert [(n, answer) for _, n, answer in runs] == [(4, ANSWERS.get(client, ANSWER))], runs
    rows = query(db, "SELECT step, tool, args, observation, error_type FROM steps WHERE tool IS NOT NULL "
                     "ORDER BY step, call_index")
    got = [(step, tool, json.loads(args), obs if error is None else None, error)
           for step, tool, args, obs, error in rows]
    assert got == EXPECTED + ([FINAL_CALL] if client.startswith("smolagents") else [])
    # One unknown call in three is below the default thresholds (a failure needs two, and half the actions):
    # with thresholds that count a single one, the rule must see it in a foreign agent's run.
    [result] = analyze_store(Store(db), thresholds=ONE_IS_ENOUGH, write=False)
    assert "hallucinated_tool" in {d.label for d in result.diagnoses}
