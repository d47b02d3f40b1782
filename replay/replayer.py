"""Re-running a recorded run through the loop: recorded responses, recorded tool results, verified.

``ReplayModel`` serves the recorded responses in order and checks that each request the loop sends
hashes to the recorded one; the first difference is drift, reported with a readable diff. Tools
serve their recorded results (a replay never repeats side effects unless a tool is named live).
After the recording runs out or drifts, a live model, if given, takes over: that is a fork.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from looptrace.loop.agent import DONE, Agent
from looptrace.loop.model import Model, ModelError, OnRetry
from looptrace.loop.policy import Policy
from looptrace.loop.result import RunResult
from looptrace.loop.tools import Tool, ToolResult
from looptrace.tracer import Tracing
from looptrace.tracer.cli.plural import count
from looptrace.tracer.sink.redact import Redactor, restore_env
from looptrace.tracer.records.requests import RequestLog
from looptrace.tracer.records.text import canonical_json

from .drift import describe_drift
from .recording import Recording

__all__ = ["ReplayModel", "ReplayReport", "replay", "WHAT_IF_FIELDS"]

log = logging.getLogger("looptrace.replay")

# Policy fields whose change cannot alter a request before the run stops: replaying the recorded
# responses under them answers "when would this policy have stopped the run?".
WHAT_IF_FIELDS = frozenset({"max_iters", "budget_usd", "stagnation_window", "max_reflections", "max_cycle_length"})
_TOO_LONG = re.compile(r"too long|context (length|window)", re.I)
_LOOP_TOOLS = frozenset({DONE.name, "scratchpad"})


class Drift(ModelError):
    pass


@dataclass
class ReplayModel:
    recording: Recording
    strict: bool = True
    live: Model | None = None
    fork_at_call: int | None = None  # serve this many recorded calls, then the live model
    served: int = 0
    drift_step: int | None = None
    drift: str | None = None
    live_from_step: int | None = None
    ran_out_at_step: int | None = None  # the loop asked for more than the recording holds
    # Recordings hold redacted requests, hashed as redacted (records/requests.py): a live request
    # is compared after the same redaction, so a run whose prompt held a secret replays exactly.
    redactor: Redactor = field(default_factory=Redactor)
    _requests: RequestLog | None = field(default=None, init=False, repr=False)

    @property
    def name(self) -> str:
        return self.recording.model

    def _go_live(self, request: Mapping[str, Any], on_retry: OnRetry | None, step: int | None) -> dict[str, Any]:
        assert self.live is not None
        if self.live_from_step is None:
            self.live_from_step = step
        return self.live.complete(request, on_retry)

    def complete(self, request: Mapping[str, Any], on_retry: OnRetry | None = None) -> dict[str, Any]:
        calls = self.recording.calls
        k = self.served
        next_step = calls[k].step if k < len(calls) else (calls[-1].step or 0) + 1 if calls else 1
        if self.live_from_step is not None or (self.fork_at_call is not None and k >= self.fork_at_call):
            return self._go_live(request, on_retry, next_step)
        if k >= len(calls):
            if self.live is not None:
                return self._go_live(request, on_retry, next_step)
            self.ran_out_at_step = next_step
            raise ModelError(f"the recording ends after {len(calls)} model calls (step {next_step - 1}); "
                             "continuing needs a live model (--base-url)")
        recorded = calls[k]
        if self._requests is None:
            self._requests = RequestLog(self.redactor.value)
        if self._requests.identity(request) != recorded.request_sha:
            if self.drift is None:
                self.drift_step = recorded.step
                self.drift = describe_drift(recorded.request, self.redactor.value(dict(request)))
            if self.live is not None:
                return self._go_live(request, on_retry, recorded.step)
            if self.strict:
                raise Drift(f"diverged at step {recorded.step}: needs a live model. {self.drift}")
            log.warning("replay: request at step %s differs from the recording; serving it anyway", recorded.step)
        self.served += 1
        if recorded.response is None:
            error = recorded.error or "the recorded call failed"
            raise ModelError(error, status="context_overflow" if _TOO_LONG.search(error) else "error")
        # Secrets were redacted when recorded; those that came from the environment come back from ours.
        return json.loads(restore_env(json.dumps(recorded.response)))


def _replay_tools(
    recording: Recording, live_tools: Mapping[str, Tool], model: ReplayModel, until_step: int | None
) -> tuple[list[Tool], list[Tool]]:
    """(tools before ``done``, tools after it) as recorded, serving recorded results: only those of
    steps before ``until_step`` (a fork), and none once the model has gone live."""
    specs = recording.calls[0].request.get("tools") or []
    queues = recording.tool_queues(until_step)

    def serve(name: str) -> Any:
        def run(**args: Any) -> ToolResult | str:
            # Recorded arguments are redacted: look the live ones up redacted the same way.
            key = canonical_json(model.redactor.value(args))
            queue = queues.get((name, key)) if model.live_from_step is None else None
            if queue:
                t = queue.popleft()
                return ToolResult(restore_env(t.observation), t.is_error, t.error_type)
            if name in live_tools:
                result = live_tools[name].run(**args)
                return result
            return ToolResult(f"Error: replay has no recorded result for {name} with these arguments, and "
                              f"{name} is not live (--live-tools {name})", True, "replay_missing")

        return run

    before, after, seen_done = [], [], False
    for spec in specs:
        name = spec.get("name")
        if name == DONE.name:
            seen_done = True
            continue
        if name in _LOOP_TOOLS:
            continue
        tool = Tool(name, spec.get("description", ""), spec.get("input_schema") or {"type": "object"}, serve(name))
        (after if seen_done else before).append(tool)
    return before, after


@dataclass
class ReplayReport:
    original: Recording
    result: RunResult
    model: ReplayModel
    policy_changes: dict[str, Any] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return self.model.drift is None and self.result.status == self.original.status and \
            self.result.steps == self.original.n_steps

    def lines(self) -> list[str]:
        o, r, m = self.original, self.result, self.model
        out = [f"replayed run {o.run_id} as {r.run_id}: {r.status} after {count(r.steps, 'step')} "
               f"(recorded: {o.status} after {count(o.n_steps, 'step')})"]
        if m.drift is not None:
            out.append(f"drift at step {m.drift_step}: {m.drift}")
        if m.live_from_step is not None:
            out.append(f"continued with the live model from step {m.live_from_step}")
        elif m.ran_out_at_step is not None:
            out.append(f"identical through step {m.ran_out_at_step - 1}; the recording ends there, and step "
                       f"{m.ran_out_at_step} needs a live model (give --base-url, or set ANTHROPIC_API_KEY)")
            return out
        elif m.drift is None:
            last = r.steps if r.status == o.status else min(r.steps, o.n_steps)
            out.append(f"identical through step {last}")
        elif m.strict:
            out.append(f"diverged at step {m.drift_step}: needs a live model (give --base-url, or set "
                       "ANTHROPIC_API_KEY, to continue from there)")
            return out
        if self.policy_changes:
            saved_steps = o.n_steps - r.steps
            out.append("what-if " + ", ".join(f"{k}={v}" for k, v in self.policy_changes.items())
                       + f": the run would have stopped with {r.status} at step {r.steps}; saved {count(saved_steps, 'step')}, "
                       f"{o.input_tokens + o.output_tokens - r.input_tokens - r.output_tokens} tokens, "
                       f"${o.cost_usd - r.cost_usd:.4f}")
        return out


def replay(
    recording: Recording,
    tracing: Tracing,
    *,
    policy_changes: Mapping[str, Any] | None = None,
    live_tools: Sequence[Tool] = (),
    live_model: Model | None = None,
    fork_at_step: int | None = None,
    system: str | None = None,
) -> ReplayReport:
    """Replay ``recording`` through the loop; record the replay as a new run linked to the original."""
    config = recording.config
    changes = dict(policy_changes or {})
    policy = Policy(**config["policy"]).with_(**changes)
    strict = not changes or not set(changes) <= WHAT_IF_FIELDS
    fork_call = None
    if fork_at_step is not None:
        fork_call = next((i for i, c in enumerate(recording.calls) if (c.step or 0) >= fork_at_step),
                         len(recording.calls))
    model = ReplayModel(recording, strict=strict, live=live_model, fork_at_call=fork_call)
    before, after = _replay_tools(recording, {t.name: t for t in live_tools}, model, fork_at_step)
    agent = Agent(model, before, tracing, system=system if system is not None else config["system"], policy=policy,
                  name=config.get("agent", recording.agent), scratchpad=bool(config.get("scratchpad", True)),
                  tool_factories=[(lambda run, t=t: t) for t in after])
    links: dict[str, Any] = ({"forked_from": recording.run_id, "fork_step": fork_at_step}
                             if fork_at_step is not None else {"replay_of": recording.run_id})
    result = agent.run(recording.task, links=links, strategy="replay" if fork_at_step is None else "fork")
    return ReplayReport(recording, result, model, changes)
