"""Commands of the loop: ``demo`` (offline scenarios) and ``run`` (a live agent)."""

from __future__ import annotations

import argparse
import os
import sys

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.cli.numbers import positive, whole
from looptrace.tracer.store import DEFAULT_DB

__all__ = ["register"]


def _demo(args: argparse.Namespace) -> int:
    from .scenarios import SCENARIOS

    # First, before the imports below (the anthropic SDK alone takes a second or more): a user who
    # just typed `make demo` sees at once that it runs.
    print(f"Running {len(SCENARIOS)} scenarios offline (scripted model on 127.0.0.1) into {args.db}", flush=True)
    from .demo import main

    return main(args.db)


def _run(args: argparse.Namespace) -> int:
    if not os.environ.get("ANTHROPIC_API_KEY") and not args.base_url:
        print("looptrace run needs a model: set ANTHROPIC_API_KEY (or give --base-url for a Messages API "
              "endpoint). To try looptrace offline, run: looptrace demo", file=sys.stderr)
        return 2
    from looptrace.tracer import Tracing

    from .agent import Agent
    from .model import AnthropicModel
    from .policy import Policy
    from .workspace import workspace_tools

    policy = Policy(max_iters=args.max_iters, budget_usd=args.budget)
    model = AnthropicModel(args.model, base_url=args.base_url, api_key=os.environ.get("ANTHROPIC_API_KEY", "none"))
    with Tracing(args.db) as tracing:
        agent = Agent(model, workspace_tools(args.workspace, writable=args.allow_write), tracing, policy=policy)
        result = agent.run(args.task)
    print(f"status: {result.status}  steps: {result.steps}  tokens: {result.input_tokens}+{result.output_tokens}  "
          f"cost: ${result.cost_usd:.4f}  run: {result.run_id}")
    if result.answer:
        print(result.answer)
    if result.error:
        print(result.error, file=sys.stderr)
    return 0 if result.ok else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "demo", "Run the bundled scenarios offline (scripted model, local server) into a store.",
                    "looptrace demo --db demo.duckdb")
    p.add_argument("--db", default="demo.duckdb", help="store to write (default demo.duckdb)")
    p.set_defaults(func=_demo)

    p = add_command(sub, "run", "Run the agent live on a task, over the files of a workspace folder.",
                    'ANTHROPIC_API_KEY=... looptrace run "Which files mention TODO?" --workspace .')
    p.add_argument("task")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("--model", default="claude-sonnet-4-5")
    p.add_argument("--base-url", default=None, help="a Messages API endpoint other than Anthropic's")
    p.add_argument("--workspace", default=".", help="folder the agent's tools can read (default .)")
    p.add_argument("--allow-write", action="store_true", help="let the agent write files in the workspace")
    p.add_argument("--max-iters", type=whole(1), default=30)
    p.add_argument("--budget", type=positive, default=1.0, help="USD budget (default 1.0)")
    p.set_defaults(func=_run)
