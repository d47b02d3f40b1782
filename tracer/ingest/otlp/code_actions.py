"""Code actions: the steps of agents that act by writing code, as tool calls. Pure functions.

A code-action agent (smolagents' ``CodeAgent``, CodeAct-style agents) answers a model turn with text
holding a code block, which its framework runs; the model's message has no tool calls. The step's action
is that code, and what the code called are the step's tool calls: the tool spans and the sub-agent runs
that started after the model call and before the run's next one, in the order they started.

- A tool span is a call of its tool, with the arguments it records (those passed by position under the
  tool's parameter names, ``final_answer("...")`` included) and its result, or its error when it failed.
- A sub-agent's run started by the code (a child run whose span is in no tool span of the parent: a
  smolagents managed agent) is a call of that agent: its arguments are those the code passed to it (read
  from the code), its observation the sub-run's output. The sub-run stays a run of its own, linked to
  this one by ``parent_run_id``.
- Code that failed calling a tool the agent lacks (the framework's own words, ``UNKNOWN_TOOL_EVIDENCE``)
  is a call of that tool, ``tool_not_found``, with the arguments the code passed and the error.
- Code whose calls left no span but that calls a final-answer tool (an instrumentation that does not trace
  it) is that call, with the arguments the code passed: the run's answer is its argument.
- Code that called nothing is one call of ``CODE_TOOL`` with the code as its argument and, as its
  observation, what the framework's step span recorded (smolagents: the execution logs). Only when the
  run went on after that turn: a run's last words may quote code without running it.

So the same code repeated makes the same calls with the same action keys, and the analyzer's repeat
rules see it. A final-answer tool's call stays a call of its step, argument included, and its answer
becomes the run's.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...records.spans import PlainSpan, ts
from .attributes import _AGENT_NAME, _error_text, _exception, _tool_call
from .values import _first, _loads, _text
from ...records import conventions as c
from .frameworks import CODE_BLOCKS, CODE_TOOL, FINAL_ANSWER_TOOLS, agent_called, final_answer, is_unknown_tool

__all__ = ["CodeCall", "code_of", "calls_in", "code_step_rows", "final_of"]

_OUTPUT = ("output.value", "traceloop.entity.output", "gen_ai.output")
_TASK = ("input.value", "traceloop.entity.input")


@dataclass(frozen=True)
class CodeCall:
    """A call of a named function in the code: what the model wrote as arguments."""

    name: str
    positional: tuple[Any, ...] = ()
    keywords: dict[str, Any] = field(default_factory=dict)

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments by name; positional ones, whose names the code does not say, under ``args``."""
        return {**({"args": list(self.positional)} if self.positional else {}), **self.keywords}


def code_of(text: str | None) -> str | None:
    """The code of a model turn: its code blocks (``CODE_BLOCKS``, the first kind found), joined."""
    if not text:
        return None
    for _, pattern in CODE_BLOCKS:
        blocks = [b.strip() for b in pattern.findall(text)]
        if any(blocks):
            return "\n\n".join(b for b in blocks if b)
    return None


def _value(node: ast.expr, code: str) -> Any:
    """A literal argument as its value; an expression (a variable, a call) as its source text."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.get_source_segment(code, node)


def calls_in(code: str) -> list[CodeCall]:
    """The calls of plain names in ``code``, in the order they appear; none when it does not parse."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    found.sort(key=lambda n: (n.lineno, n.col_offset))
    return [CodeCall(str(getattr(n.func, "id", "")), tuple(_value(a, code) for a in n.args
                                                           if not isinstance(a, ast.Starred)),
                     {k.arg: _value(k.value, code) for k in n.keywords if k.arg is not None})
            for n in found]


def final_of(row: dict[str, Any], span: PlainSpan) -> tuple[bool, Any]:
    """(True, the answer) when the tool call ``row`` of ``span`` is a final-answer tool's; its answer is
    the argument the tool names, else what the tool returned."""
    tool = str(row["tool"])
    if tool not in FINAL_ANSWER_TOOLS:  # most calls: their arguments need not be parsed to know
        return False, None
    done, answer = final_answer(tool, _loads(row["args"]) if row["args"] is not None else None)
    if done and answer is None:
        answer = _first(span.attributes, _OUTPUT)
    return done, answer


def _error_type(span: PlainSpan) -> str:
    return str(_exception(span).get("exception.type") or "tool_error")


def _task_of(span: PlainSpan) -> dict[str, Any]:
    task = _loads(_first(span.attributes, _TASK))
    if isinstance(task, dict) and "task" in task:
        task = task["task"]
    return {"task": task}


def _agent_row(run_id: str, step: int, index: int, span: PlainSpan, calls: list[CodeCall]) -> dict[str, Any]:
    """The call of a sub-agent whose run ``span`` started from the code."""
    name = agent_called(span.name, span.attributes, _AGENT_NAME)
    call = next((c for c in calls if c.name == name), None)
    if call is not None:
        calls.remove(call)  # the next run of the same agent is the code's next call of it
    failed = span.status_code == "ERROR"
    output = _first(span.attributes, _OUTPUT)
    observation = _text(output) if output is not None else _error_text(span) if failed else None
    return {
        "run_id": run_id, "step": step, "call_index": index, "tool_call_id": None, "tool": name,
        "args": _text(call.arguments() if call is not None else _task_of(span)), "observation": observation,
        "observation_bytes": len(observation.encode("utf-8")) if observation is not None else 0,
        "is_error": failed, "error_type": _error_type(span) if failed else None, "started_at": ts(span.start_ns),
        "ended_at": ts(span.end_ns), "span_id": span.span_id,
    }


def _code_row(run_id: str, step: int, model: PlainSpan, code: str,
              step_span: PlainSpan | None) -> dict[str, Any]:
    """The one call of code that called no tool: the interpreter's, with the step's output."""
    failed = step_span is not None and step_span.status_code == "ERROR"
    output = _first(step_span.attributes, _OUTPUT) if step_span is not None else None
    observation = _text(output) if output is not None else (
        _error_text(step_span) if failed and step_span is not None else None)
    return {
        "run_id": run_id, "step": step, "call_index": 0, "tool_call_id": None, "tool": CODE_TOOL,
        "args": _text({"code": code}), "observation": observation,
        "observation_bytes": len(observation.encode("utf-8")) if observation is not None else 0,
        "is_error": failed, "error_type": _error_type(step_span) if failed and step_span is not None else None,
        "started_at": ts(model.end_ns),
        "ended_at": ts(step_span.end_ns if step_span is not None else None),
        "span_id": step_span.span_id if step_span is not None else None,
    }


def code_step_rows(run_id: str, step: int, model: PlainSpan, text: str | None, tools: Sequence[PlainSpan],
                   agents: Sequence[PlainSpan], step_span: PlainSpan | None, last: bool,
                   moved: dict[str, set[str]]) -> tuple[list[dict[str, Any]], tuple[bool, Any]]:
    """The tool calls of a step whose model turn called no tool: the calls ``tools`` (tool spans) and
    ``agents`` (sub-run spans) that started in it, else the code itself (see the module's docstring).
    Also (True, the answer) when one of them is a final-answer tool's call."""
    code = code_of(text)
    calls = calls_in(code) if code else []
    rows: list[dict[str, Any]] = []
    answer: tuple[bool, Any] = (False, None)
    agent_ids = {a.span_id for a in agents}
    for span in sorted([*tools, *agents], key=lambda s: (s.start_ns or 0, s.span_id)):
        if span.span_id in agent_ids:
            rows.append(_agent_row(run_id, step, len(rows), span, calls))
            continue
        row = _tool_call(span, run_id, step, len(rows), moved.setdefault(span.span_id, set()))
        done, value = final_of(row, span)
        answer = (True, value) if done else answer
        rows.append(row)
    if not rows and code:
        unknown = _unknown_call(calls, step_span)
        ending = next((call for call in calls if call.name in FINAL_ANSWER_TOOLS), None)
        if unknown is not None:
            rows.append(_unknown_row(run_id, step, model, unknown, step_span))  # type: ignore[arg-type]
        elif ending is not None:
            rows.append(_final_row(run_id, step, model, ending))
            answer = final_answer(ending.name, _final_arguments(ending))
        elif not last:
            rows.append(_code_row(run_id, step, model, code, step_span))
    return rows, answer


def _final_arguments(call: CodeCall) -> dict[str, Any]:
    """A final-answer call's arguments, the answer passed by position under the tool's answer argument."""
    key = FINAL_ANSWER_TOOLS[call.name]
    if key is None or not call.positional or key in call.keywords:
        return call.arguments()
    rest = list(call.positional[1:])
    return {key: call.positional[0], **({"args": rest} if rest else {}), **call.keywords}


def _final_row(run_id: str, step: int, model: PlainSpan, call: CodeCall) -> dict[str, Any]:
    return {
        "run_id": run_id, "step": step, "call_index": 0, "tool_call_id": None, "tool": call.name,
        "args": _text(_final_arguments(call)), "observation": None, "observation_bytes": 0, "is_error": False,
        "error_type": None, "started_at": ts(model.end_ns), "ended_at": ts(model.end_ns), "span_id": None,
    }


def _unknown_call(calls: Sequence[CodeCall], step_span: PlainSpan | None) -> CodeCall | None:
    """The call of the code that its step's error says is of a tool the agent lacks, if any."""
    if step_span is None or step_span.status_code != "ERROR":
        return None
    error = _error_text(step_span)
    return next((call for call in calls if is_unknown_tool(error, call.name)), None)


def _unknown_row(run_id: str, step: int, model: PlainSpan, call: CodeCall,
                 step_span: PlainSpan) -> dict[str, Any]:
    error = _error_text(step_span)
    return {
        "run_id": run_id, "step": step, "call_index": 0, "tool_call_id": None, "tool": call.name,
        "args": _text(call.arguments()), "observation": error,
        "observation_bytes": len(error.encode("utf-8")) if error is not None else 0,
        "is_error": True, "error_type": c.TOOL_NOT_FOUND, "started_at": ts(model.end_ns),
        "ended_at": ts(step_span.end_ns), "span_id": step_span.span_id,
    }
