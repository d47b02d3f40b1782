"""``looptrace collect --alert``: the stagnation rules on runs still going, a hook fired once per run and
finding, and hooks that hang or fail never slowing the receiver's acknowledgements.

The agent is the real OTel SDK with the real OTLP/HTTP exporter, one request per span as each span ends
(``SimpleSpanProcessor``): ``export()`` returns when collect acknowledged the span.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExporter

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.alerts import Alerts, run_findings
from looptrace.tracer.rules import Thresholds

from .conftest import PYTHON, ROOT, python_env, query
from .test_ingest import provider

pytestmark = pytest.mark.slow


class LoopingAgent:
    """A GenAI agent run that reads the same missing file on every step; its root span stays open."""

    def __init__(self, exporter: SpanExporter) -> None:
        self.provider, self.tracer = provider(exporter)
        self.root = self.tracer.start_span("invoke_agent reader", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "reader", "gen_ai.request.model": "gpt-4o"})
        self.steps = 0

    def step(self) -> float:
        """One model call and its tool call; seconds the exporter waited for the two acknowledgements."""
        i = self.steps
        self.steps += 1
        started = time.monotonic()
        with trace.use_span(self.root, end_on_exit=False):
            with self.tracer.start_as_current_span("chat gpt-4o", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o",
                    "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 20}):
                pass
            with self.tracer.start_as_current_span("execute_tool read_file", attributes={
                    "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
                    "gen_ai.tool.call.id": f"call_{i}", "gen_ai.tool.call.arguments": '{"path": "notes.txt"}',
                    "gen_ai.tool.call.result": "FileNotFoundError: notes.txt", "error.type": "FileNotFoundError"}):
                pass
        return time.monotonic() - started

    def end(self) -> None:
        self.root.end()
        self.provider.shutdown()


def _collect(db: Path, *alert: str) -> tuple[subprocess.Popen[str], int]:
    """A started collect on a port the kernel gives it, and that port (its "listening on" line names it)."""
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                             "--grpc-port", "off", "--settle", "0.5", "--diagnose-every", "0", *alert],
                            cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    while "listening on" not in (line := proc.stdout.readline()):
        assert line, proc.stderr.read() if proc.stderr else ""
    port = urlsplit(line.split("listening on ", 1)[1].split(",", 1)[0].split()[0]).port
    assert port, line
    return proc, port


def test_the_alert_command_runs_once_while_the_run_is_still_going(tmp_path: Path) -> None:
    db, fired = tmp_path / "store.duckdb", tmp_path / "fired"
    command = f'cat >> {fired}.json; echo "$LOOPTRACE_RULE $LOOPTRACE_STEPS $LOOPTRACE_AGENT" >> {fired}.env'
    collect, port = _collect(db, "--alert", command, "--alert-repeats", "3")
    try:
        agent = LoopingAgent(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"))
        agent.step()
        agent.step()
        time.sleep(2.5)  # two previews later: two identical calls are no finding yet
        assert not Path(f"{fired}.env").exists()
        agent.step()  # the third identical failing call: its spans are acknowledged when this returns
        tripped = time.monotonic()
        while not Path(f"{fired}.env").exists() and time.monotonic() - tripped < 30:
            time.sleep(0.05)
        took = time.monotonic() - tripped
        # Still going when it fired; its root span unsent, the run is named by what its spans say so far.
        [(status, agent_name)] = query(db, "SELECT status, agent FROM runs")
        assert status == "running"
        for _ in range(3):
            agent.step()  # the streak goes on: the same finding, not a new one
        time.sleep(2.5)
        agent.end()
    finally:
        collect.terminate()
        out, err = collect.communicate(timeout=60)
    assert took < 5.0, f"the alert came {took:.1f} s after the span that tripped it"
    assert Path(f"{fired}.env").read_text().splitlines() == [f"repeat 1,2,3 {agent_name}"]  # once
    finding = json.loads(Path(f"{fired}.json").read_text())
    assert (finding["status"], finding["agent"], finding["steps"]) == ("running", agent_name, [1, 2, 3])
    assert "1 alert on runs still going: 1 fired, 0 failed" in out, out + err


def test_hooks_that_hang_or_fail_never_slow_acknowledgements(db: Path) -> None:
    """Every finding's hook sleeps past its timeout (or exits 1): the spans' acknowledgements do not wait."""
    plain, hung = [], []
    # The failing hook first: it also warms the store up, so the first round's file creation is no one's cost.
    for hook, waits in (("exit 1", None), (None, plain), ("sleep 30", hung)):
        alerts = Alerts(hook, timeout=1.0, thresholds=Thresholds(repeat_min=2, fail_repeat_min=2), max_queued=2) \
            if hook else None
        with OtlpReceiver(db, port=0, grpc_port=None, settle=0.5, preview_every=0.2, alerts=alerts) as receiver:
            agents = [LoopingAgent(OTLPSpanExporter(endpoint=receiver.url)) for _ in range(4)]
            for _ in range(5):
                for agent in agents:
                    latency = agent.step()
                    if waits is not None:
                        waits.append(latency)
                time.sleep(0.3)  # a preview round: new findings keep arriving while hooks hang
            for agent in agents:
                agent.end()
        if alerts is not None:
            alerts.close(timeout=30)
            s = alerts.stats
            assert s.findings == 4 and s.fired == 0, s  # one per run (4 runs), none succeeded
            if hook == "sleep 30":
                assert s.timed_out >= 1 and s.timed_out + s.dropped == 4, s  # killed at 1 s, or dropped (queue of 2)
            else:
                assert s.failed + s.dropped == 4 and s.failed >= 1, s
    hung_p95, plain_p95 = sorted(hung)[int(0.95 * len(hung))], sorted(plain)[int(0.95 * len(plain))]
    print(f"ack latency per step (2 spans), p95: {plain_p95 * 1000:.1f} ms without hooks, "
          f"{hung_p95 * 1000:.1f} ms with hooks hanging")
    assert max(hung) < 5.0  # a hook's 1 s timeout never showed up in an acknowledgement


def test_findings_are_read_from_a_running_run_only() -> None:
    call = {"run_id": "r", "tool": "read", "args": '{"p": 1}', "observation": "nope", "is_error": True}
    rows: dict[str, Any] = {"run_records": [{"run_id": "r", "agent": "a", "status": None}],
                            "tool_call_records": [{**call, "step": s, "call_index": 0} for s in (1, 2, 3)],
                            "step_records": [{"run_id": "r", "step": s, "cost_usd": 0.01} for s in (1, 2, 3)]}
    found = run_findings(rows, Thresholds(repeat_min=3, fail_repeat_min=3))
    assert [(f["rule"], f["steps"], f["run_spend_usd"]) for f in found] == [
        ("repeat", [1, 2, 3], 0.03), ("failing", [1, 2, 3], 0.03)]  # one streak: Alerts sends the first
    assert run_findings(rows, Thresholds(repeat_min=4, fail_repeat_min=4)) == []
    assert [f["rule"] for f in run_findings(rows, Thresholds(repeat_min=4, fail_repeat_min=4), max_usd=0.03)] == [
        "max_usd"]
    rows["run_records"][0]["status"] = "ok"  # ended: the analyzer's business, not an alert's
    assert run_findings(rows, Thresholds(repeat_min=3)) == []
    assert os.environ.get("LOOPTRACE_RUN_ID") is None
