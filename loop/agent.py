"""The ReAct loop: the runtime owns the control flow, the model only picks the next action.

One iteration is one traced step: (compact if the context is too big) -> ask the model -> run the
tools it asked for, in parallel -> check for stagnation. Caps (``max_iters``, budget) are checked
by the runtime before every model call, whatever the model says. Every way a run can end is a
``Stop`` with a status, turned into a ``RunResult`` that carries the whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from looptrace.tracer import Run, Step, Tracing
from looptrace.tracer.spans.conversation import response_text, tool_uses
from looptrace.tracer.records.actions import call_key
from looptrace.tracer.records.pricing import usage_of
from looptrace.tracer.rules import Finding, RepeatWatch, outcome_key

from . import defences
from .model import Model, ModelError
from .policy import DEFAULT_POLICY, Policy
from .result import RunResult, Stop
from .stagnation import watch
from .tools import Tool, Toolbox, ToolResult

__all__ = ["Agent", "DONE", "DEFAULT_SYSTEM", "REFLECTION", "ToolFactory", "ask"]

DEFAULT_SYSTEM = (
    "You are a careful agent. Work step by step: think briefly, then call a tool. "
    "When the task is finished, call `done` with the final answer."
)
REFLECTION = (
    "You are repeating yourself ({detail}) and it is not making progress. "
    "Try something different, or call done with your best answer."
)
DONE = Tool(
    "done",
    "Finish the task: give the final answer.",
    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
     "additionalProperties": False},
    lambda answer: answer,
)

ToolFactory = Callable[[Run], Tool]
"""Makes a tool that needs the current run (e.g. ``spawn_subagent``, which links child runs)."""


def ask(step: Step, model: Model, request: Mapping[str, Any]) -> dict[str, Any]:
    """One model call as a ``chat`` span of ``step``: each retry an event, a final failure recorded."""
    with step.llm_call(request) as call:

        def on_retry(attempt: int, error: BaseException, wait: float) -> None:
            call.retry(attempt, error, wait)
            step.event("retry", attempt=attempt, error=f"{type(error).__name__}: {error}", wait_seconds=wait)

        try:
            response = model.complete(request, on_retry)
        except ModelError as exc:
            call.fail(exc)
            raise
        call.response(response)
        return response


@dataclass
class _State:
    task: str
    messages: list[dict[str, Any]]
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    context_tokens: int = 0
    repeats: RepeatWatch | None = None  # the stagnation rules since the last reflection turn
    reflections: int = 0

    def add_usage(self, model: str, response: Mapping[str, Any]) -> None:
        usage = usage_of(response)
        self.input_tokens += usage.total_input
        self.output_tokens += usage.output_tokens
        self.context_tokens = usage.total_input
        self.cost_usd += usage.cost(model)


@dataclass
class Agent:
    model: Model
    tools: Sequence[Tool]
    tracing: Tracing
    system: str = DEFAULT_SYSTEM
    policy: Policy = DEFAULT_POLICY
    name: str = "looptrace-react"
    scratchpad: bool = True
    tool_factories: Sequence[ToolFactory] = ()

    def run(self, task: str, *, parent: Run | None = None, strategy: str = "react",
            links: Mapping[str, Any] | None = None, messages: list[dict[str, Any]] | None = None) -> RunResult:
        state = _State(task, list(messages) if messages else [{"role": "user", "content": task}])
        pad = defences.Scratchpad() if self.scratchpad else None
        with self.tracing.run(self.name, task=task, model=self.model.name, parent=parent, strategy=strategy,
                              links=links, config=self.config()) as run:
            extra = [make(run) for make in self.tool_factories] + ([pad.tool()] if pad else [])
            toolbox = Toolbox([*self.tools, DONE, *extra])
            stop: Stop | None = None
            while stop is None:
                stop = self._caps(state)
                if stop is None:
                    with run.step() as step:
                        state.steps += 1
                        stop = self._step(state, step, toolbox, pad)
            run.finish(stop.status, answer=stop.answer, error=None if stop.status == "ok" else stop.message)
            return RunResult(run.run_id, stop.status, stop.answer, state.steps, state.input_tokens,
                             state.output_tokens, state.cost_usd, state.messages,
                             None if stop.status == "ok" else stop.message, state.reflections)

    def config(self) -> dict[str, Any]:
        """What replay needs to run this loop again the same way."""
        return {"system": self.system, "policy": asdict(self.policy), "tools": [t.name for t in self.tools],
                "scratchpad": self.scratchpad, "agent": self.name}

    # -- one iteration ------------------------------------------------------------------------------

    def _caps(self, state: _State) -> Stop | None:
        p = self.policy
        if state.steps >= p.max_iters:
            return Stop("max_iters", f"stopped after {state.steps} steps (max_iters={p.max_iters})")
        if p.budget_usd is not None and state.cost_usd >= p.budget_usd:
            return Stop("budget_exceeded", f"spent ${state.cost_usd:.4f} of a ${p.budget_usd:.4f} budget")
        return None

    def _step(self, state: _State, step: Step, toolbox: Toolbox, pad: defences.Scratchpad | None) -> Stop | None:
        self._maybe_compact(state, step)
        request = {
            "model": self.model.name,
            "max_tokens": self.policy.max_tokens,
            "system": pad.system(self.system) if pad else self.system,
            "tools": toolbox.specs(),
            "messages": state.messages,
        }
        try:
            response = self._ask(step, request)
        except ModelError as exc:
            return Stop(exc.status, str(exc))
        state.add_usage(self.model.name, response)
        state.messages.append({"role": "assistant", "content": response.get("content") or []})
        text = response_text(response)
        if text:
            step.thought(text)
        uses = tool_uses(response)
        if not uses:
            if response.get("stop_reason") == "max_tokens":
                return Stop("error", "the model's response was cut at max_tokens without an action")
            return Stop("ok", answer=text)
        results, answer, raw = self._act(uses, step, toolbox)
        state.messages.append({"role": "user", "content": results})
        if answer is not None:
            return Stop("ok", answer=answer)
        return self._check_stagnation(state, step, uses, raw)

    def _ask(self, step: Step, request: Mapping[str, Any]) -> dict[str, Any]:
        return ask(step, self.model, request)

    def _act(self, uses: list[Mapping[str, Any]], step: Step,
             toolbox: Toolbox) -> tuple[list[dict[str, Any]], str | None, list[ToolResult]]:
        def one(index: int, use: Mapping[str, Any]) -> tuple[dict[str, Any], str | None, ToolResult]:
            name, args, use_id = str(use.get("name")), use.get("input"), str(use.get("id"))
            with step.tool_call(name, args, call_id=use_id, call_index=index) as call:
                result = toolbox.call(name, args)
                call.result(result.text, is_error=result.is_error, error_type=result.error_type)
            trimmed = defences.trim(result.text, self.policy.max_observation_bytes)
            if trimmed.cut_bytes:
                step.event("trim", tool=name, call_index=index, cut_bytes=trimmed.cut_bytes,
                           kept_bytes=len(result.text.encode("utf-8")) - trimmed.cut_bytes)
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": use_id, "content": trimmed.text}
            if result.is_error:
                block["is_error"] = True
            answer = result.text if name == DONE.name and not result.is_error else None
            return block, answer, result

        if len(uses) == 1:
            done = [one(0, uses[0])]
        else:
            with ThreadPoolExecutor(min(len(uses), self.policy.max_parallel_tools)) as pool:
                done = list(pool.map(one, range(len(uses)), uses))
        answers = [a for _, a, _ in done if a is not None]
        return [b for b, _, _ in done], (answers[0] if answers else None), [r for _, _, r in done]

    def _check_stagnation(self, state: _State, step: Step, uses: list[Mapping[str, Any]],
                          results: list[ToolResult]) -> Stop | None:
        """The rules layer's repeat rules (``loop/stagnation.py``), fed this step's calls and results."""
        p = self.policy
        if state.repeats is None:
            state.repeats = watch(p.stagnation_window, p.max_cycle_length)
        rep: Finding | None = None
        for use, result in zip(uses, results):
            name = str(use.get("name"))
            found = state.repeats.add(state.steps, call_key(name, use.get("input")),
                                      outcome_key(result.text, state.repeats.thresholds), result.is_error, tool=name)
            rep = rep or found
        if rep is None:
            return None
        detail = {"repeat": f"the same action {rep.calls} times in a row",
                  "failing": f"the same tool failing {rep.calls} times in a row"}.get(
            rep.rule, f"a cycle of {rep.period} actions, repeated")
        if state.reflections >= p.max_reflections:
            step.event("stagnation", kind=rep.rule, period=rep.period, repeated=rep.calls)
            return Stop("stagnated", f"stagnated: {detail} after {state.reflections} reflection(s)")
        state.reflections += 1
        state.repeats = None  # a reflection restarts the count
        step.event("reflection", kind=rep.rule, period=rep.period, repeated=rep.calls)
        state.messages[-1]["content"].append({"type": "text", "text": REFLECTION.format(detail=detail)})
        return None

    def _maybe_compact(self, state: _State, step: Step) -> None:
        limit = self.policy.compact_at_tokens
        if limit is None or state.context_tokens < limit:
            return
        cut = defences.compaction_cut(state.messages, self.policy.keep_recent_turns)
        if cut is None:
            return
        request = defences.summary_request(state.messages, cut, self.model.name, self.policy.max_tokens)
        try:
            response = self._ask(step, request)
        except ModelError as exc:
            step.event("compaction_failed", error=str(exc))
            return
        state.add_usage(self.model.name, response)
        before, tokens = len(state.messages), state.context_tokens
        state.messages = defences.compacted(state.messages, cut, state.task, response_text(response))
        state.context_tokens = 0
        step.event("compaction", messages_before=before, messages_after=len(state.messages),
                   context_tokens_before=tokens)
