"""Commands for recorded runs: ``replay``, ``fork``, ``resume``, ``serve``, ``diff``, ``export-test``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from looptrace.tracer.cli.main import add_command
from looptrace.tracer.cli.numbers import port, positive, whole
from looptrace.tracer.cli.plural import count
from looptrace.tracer.store import DEFAULT_DB

if TYPE_CHECKING:
    from .diff import StepFacts

__all__ = ["register"]

_POLICY_FLAGS: tuple[tuple[str, Callable[[str], Any], str], ...] = (
    ("max_iters", whole(1), "stop after this many model calls"),
    ("budget_usd", positive, "stop once the run cost this many USD"),
    ("stagnation_window", whole(2), "same action this many times in a row is stagnation"),
    ("max_reflections", whole(0), "reflection turns before stopping as stagnated"),
    ("max_observation_bytes", whole(1), "trim tool results to this many bytes"),
    ("compact_at_tokens", whole(1), "compact older turns past this many context tokens"),
)


def _add_common(p: argparse.ArgumentParser, *, policy: bool = True, live: bool = True) -> None:
    p.add_argument("run_id", help="run id (a unique prefix is enough)")
    p.add_argument("--db", default=DEFAULT_DB)
    if policy:
        for name, kind, help_text in _POLICY_FLAGS:
            flag = "--budget" if name == "budget_usd" else "--" + name.replace("_", "-")
            p.add_argument(flag, dest=name, type=kind, default=None, help=help_text)
    if live:
        p.add_argument("--workspace", default=None, help="folder for live workspace tools")
        p.add_argument("--live-tools", default="", help="comma-separated tools to run for real (default none)")
        p.add_argument("--base-url", default=None, help="a Messages API endpoint to continue with")
        p.add_argument("--model", default=None, help="model for the live part (default: the recorded one)")


def _policy_changes(args: argparse.Namespace) -> dict[str, Any]:
    return {name: getattr(args, name) for name, _, _ in _POLICY_FLAGS if getattr(args, name, None) is not None}


def _live_tools(args: argparse.Namespace, *, all_tools: bool = False) -> list[Any]:
    if not args.workspace:
        if args.live_tools:
            raise SystemExit("--live-tools needs --workspace DIR (the folder the tools work on)")
        return []
    from looptrace.loop.workspace import workspace_tools

    tools = workspace_tools(args.workspace)
    wanted = {n.strip() for n in args.live_tools.split(",") if n.strip()}
    return tools if all_tools else [t for t in tools if t.name in wanted]


def _live_model(args: argparse.Namespace, model: str) -> Any:
    if not args.base_url and not os.environ.get("ANTHROPIC_API_KEY"):
        return None
    from looptrace.loop.model import AnthropicModel

    return AnthropicModel(args.model or model, base_url=args.base_url,
                          api_key=os.environ.get("ANTHROPIC_API_KEY", "not-needed"))


def _recording(args: argparse.Namespace, *, need_config: bool = True) -> Any:
    """The recording of ``args.run_id``, or None after printing why it cannot be had."""
    from looptrace.tracer.store import Store, StoreError

    from .recording import RecordingError, load_recording

    try:
        return load_recording(Store(args.db), args.run_id, need_config=need_config)
    except (RecordingError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _run_replay(args: argparse.Namespace, *, fork_at: int | None = None, resume: bool = False) -> int:
    from looptrace.tracer import Tracing

    from .replayer import replay

    recording = _recording(args)
    if recording is None:
        return 1
    live_model = _live_model(args, recording.model) if (fork_at or resume or args.base_url) else None
    if (fork_at or resume) and live_model is None:
        print("error: continuing a run needs a live model: give --base-url URL or set ANTHROPIC_API_KEY",
              file=sys.stderr)
        return 2
    if resume:
        fork_at = (recording.calls[-1].step or 0) + 1
    system = getattr(args, "system", None)
    if system and system.startswith("@"):
        system = Path(system[1:]).read_text()
    with Tracing(args.db) as tracing:
        report = replay(recording, tracing, policy_changes=_policy_changes(args),
                        live_tools=_live_tools(args, all_tools=bool(fork_at)), live_model=live_model,
                        fork_at_step=fork_at, system=system)
    print("\n".join(report.lines()))
    return 0 if report.model.drift is None or live_model is not None else 1


def _serve(args: argparse.Namespace) -> int:
    from looptrace.loop.openai_server import ChatCompletionsServer
    from looptrace.loop.server import MessagesServer

    from .serve import OpenAIRecordingHandler, RecordingHandler, is_openai

    recording = _recording(args, need_config=False)  # serving needs the model calls, not the loop's settings
    if recording is None:
        return 1
    server: MessagesServer | ChatCompletionsServer
    if is_openai(recording):
        server = ChatCompletionsServer(OpenAIRecordingHandler(recording, lenient=args.lenient), port=args.port)
        env = "OPENAI_BASE_URL"
    else:
        server, env = MessagesServer(RecordingHandler(recording, lenient=args.lenient), port=args.port), \
            "ANTHROPIC_BASE_URL"
    server.start()
    print(f"serving run {recording.run_id} ({count(len(recording.calls), 'model call')}) at {server.base_url}\n"
          f"point your agent at it: {env}={server.base_url}  (Ctrl-C stops)", flush=True)
    try:
        import threading

        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _shown(value: int | float | None, *, digits: int = 0) -> str | int | float:
    return "?" if value is None else round(value, digits) if digits else value


def _diff(args: argparse.Namespace) -> int:
    from looptrace.tracer.store import Store
    from looptrace.tracer.cli.table import format_table

    from looptrace.tracer.store import StoreError

    from .diff import delta, diff_runs, load_step_facts
    from .recording import RecordingError, resolve_run

    try:
        with Store(args.db).reader() as conn:
            a, b = resolve_run(conn, args.run_a), resolve_run(conn, args.run_b)
            d = diff_runs(load_step_facts(conn, a), load_step_facts(conn, b))
    except (RecordingError, StoreError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    rows = []
    for p in d.pairs:
        mark = "=" if p.same else ("-" if p.b is None else "+" if p.a is None else "~")
        rows.append([mark, p.a.step if p.a else "", _described(p.a or p.b)[:50] if p.a or p.b else "",
                     p.b.step if p.b else "",
                     _shown(delta(p.a and p.a.tokens, p.b and p.b.tokens, a_exists=p.a is not None,
                                  b_exists=p.b is not None)),
                     _shown(delta(p.a and p.a.cost_usd, p.b and p.b.cost_usd, a_exists=p.a is not None,
                                  b_exists=p.b is not None), digits=6),
                     _shown(delta(p.a and p.a.latency_ms, p.b and p.b.latency_ms, a_exists=p.a is not None,
                                  b_exists=p.b is not None))])
        if mark == "~" and p.b is not None:  # B did something else at A's place: its action on a line of its own, under A's
            rows.append(["", "", "→ " + _described(p.b)[:48], "", "", "", ""])
    print(format_table(["", "step A", "action", "step B", "Δtokens", "Δcost_usd", "Δlatency_ms"], rows))
    if d.first_divergence is None:
        print(f"no divergence: {count(d.common, 'step')} in common")
    else:
        p = d.pairs[d.first_divergence]
        where = f"step {p.a.step} of A" if p.a else f"step {p.b.step} of B" if p.b else "?"
        print(f"first divergent decision at {where}; {count(d.common, 'step')} in common")
    return 0


def _described(facts: StepFacts) -> str:
    """A step's action in the diff's table; a failed step says so first, so a cut keeps it."""
    if facts.call_error is not None and not facts.action:
        return "✗ model call failed"
    if facts.answered:
        return "(answer)"
    failure = ", ".join(dict.fromkeys(facts.tool_errors))
    return f"✗ {failure} · {facts.action}" if failure else facts.action


def _export_test(args: argparse.Namespace) -> int:
    from .regression import export_test

    recording = _recording(args)
    if recording is None:
        return 1
    test, cassette = export_test(recording, args.output)
    print(f"wrote {test} and {cassette}; run: pytest {test}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "replay", "Re-run a recorded run from its recorded responses and tool results; verify it, "
                    "or ask what a different policy would have done.",
                    "looptrace replay 3f2a --db demo.duckdb --max-iters 4")
    _add_common(p)
    p.set_defaults(func=_run_replay)

    p = add_command(sub, "fork", "Replay steps 1..K-1 from the recording, then continue from step K with a live "
                    "model (optionally with another system prompt or policy).",
                    "looptrace fork 3f2a --at 3 --base-url http://127.0.0.1:8080 --workspace .")
    _add_common(p)
    p.add_argument("--at", type=whole(1), required=True, help="the first step to take live")
    p.add_argument("--system", default=None, help="a new system prompt (text, or @file)")
    p.set_defaults(func=lambda a: _run_replay(a, fork_at=a.at))

    p = add_command(sub, "resume", "Continue a killed or interrupted run from its last recorded step.",
                    "ANTHROPIC_API_KEY=... looptrace resume 3f2a --workspace .")
    _add_common(p)
    p.set_defaults(func=lambda a: _run_replay(a, resume=True))

    p = add_command(sub, "serve", "Serve a recorded run as the API it was recorded from (Anthropic or OpenAI), for agents in "
                    "any language.",
                    "looptrace serve 3f2a --db demo.duckdb --port 8089")
    _add_common(p, policy=False, live=False)
    p.add_argument("--port", type=port, default=8089)
    p.add_argument("--lenient", action="store_true", help="answer drifted requests with the next recorded response")
    p.set_defaults(func=_serve)

    p = add_command(sub, "diff", "Align two runs' actions and show the first divergent decision and per-step deltas.",
                    "looptrace diff 3f2a 9c1b --db demo.duckdb")
    p.add_argument("run_a")
    p.add_argument("run_b")
    p.add_argument("--db", default=DEFAULT_DB)
    p.set_defaults(func=_diff)

    p = add_command(sub, "export-test", "Write a pytest file (and its cassette) that replays a run offline and checks "
                    "its invariants.", "looptrace export-test 3f2a --db demo.duckdb -o tests/test_healthy.py")
    p.add_argument("run_id")
    p.add_argument("--db", default=DEFAULT_DB)
    p.add_argument("-o", "--output", required=True)
    p.set_defaults(func=_export_test)
