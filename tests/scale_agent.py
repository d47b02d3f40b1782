"""A store-less agent host for the scale-path test: bundled scenarios, traced over OTLP only.

usage: python -m tests.scale_agent ENDPOINT SCENARIO...
Runs each named scenario from ``loop.scenarios.SCENARIOS`` through the real loop, the real
``anthropic`` SDK and its own scripted server, with ``Tracing(db=None, otlp_endpoint=ENDPOINT)``: the
process never touches a store, as an agent host behind a collector would not. Prints one
"<scenario> <run_id> <status> <steps>" line per run, then "flushed" once every span was accepted; exits 1 if
the OTLP queue would not drain.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.scenarios import SCENARIOS, conversations, make_sandbox
from looptrace.loop.scripted import SCRIPTED_MODEL, Script
from looptrace.loop.server import MessagesServer
from looptrace.loop.workspace import workspace_tools
from looptrace.tracer import Tracing

FLUSH_DEADLINE = 20.0  # seconds; Tracing.flush() waits at most 0.5 s a call, so ask until it is done


def main() -> int:
    endpoint, names = sys.argv[1], sys.argv[2:]
    by_name = {s.name: s for s in SCENARIOS}
    scenarios = [by_name[n] for n in names]
    tracing = Tracing(None, otlp_endpoint=endpoint, service_name="scale-agent")
    with tempfile.TemporaryDirectory(prefix="looptrace-scale-") as tmp, \
            MessagesServer(Script(conversations(scenarios))) as server:
        tools = workspace_tools(make_sandbox(Path(tmp)))
        model = AnthropicModel(SCRIPTED_MODEL, base_url=server.base_url, api_key="offline",
                               retry=RetryPolicy(base_delay=0.02, max_delay=0.2))
        for s in scenarios:
            result = Agent(model, tools, tracing, policy=s.policy, name=f"scale-{s.name}").run(s.task)
            print(s.name, result.run_id, result.status, result.steps, flush=True)
    deadline = time.monotonic() + FLUSH_DEADLINE
    while not tracing.flush():
        if time.monotonic() > deadline:
            print("OTLP queue did not drain", file=sys.stderr, flush=True)
            return 1
    tracing.shutdown()
    print("flushed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
