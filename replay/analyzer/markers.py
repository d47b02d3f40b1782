"""End markers as data: what agent frameworks write when they stop, and the label each supports.

Frameworks say why a run ended, in their own words: SWE-agent's ``exit_cost``, mini-swe-agent's
``LimitsExceeded``, an Inspect ``sample_limit`` event, OpenHands' "maximum iteration", LangGraph's
recursion limit. An importer maps the exit statuses it knows to a run status, but the same words also
reach the store through channels no importer interprets: a sub-agent's last action, an error message,
a span event, a run attribute. So the analyzer reads them itself, from one table: each row is a
pattern, the label it supports, and the public format it comes from (tests/test_markers.py has an
example of each, named by that format). Adding a framework is adding rows, not code.

Only the end of a run is searched (its status, error, answer, attributes, and the last few steps'
thought, observation and events): a marker quoted mid-run is not how the run ended.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Marker", "MARKERS", "ERROR_MARKERS", "STATUS_MARKERS", "END_TOOLS", "is_end_tool", "EXCEPTION_LINE",
           "MarkerHit", "find_markers", "TAIL_STEPS", "MAY_MARK_SQL", "ascii_superset"]

TAIL_STEPS = 3
"""How many final steps are searched for markers (the harness's closing step, the model's last turn)."""


@dataclass(frozen=True)
class Marker:
    pattern: str  # a regular expression (Python ``re``), searched case-sensitively unless it says (?i)
    label: str  # the analyzer label the marker supports
    format: str  # the public format or framework that writes it

    def compiled(self) -> re.Pattern[str]:
        return _compiled(self.pattern)


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _CACHE:
        _CACHE[pattern] = re.compile(pattern)
    return _CACHE[pattern]


# Run statuses, matched whole: looptrace's own (and every importer's) vocabulary.
STATUS_MARKERS: dict[str, str] = {
    "max_iters": "cap_hit",
    "budget_exceeded": "cap_hit",
    "context_overflow": "context_bomb",
    "stagnated": "stagnation",
}

# Checked in order; a run can carry several (SWE-agent's "submitted (exit_cost)" is a cap, whatever
# "submitted" says), and the rules take the failure labels before ``ok``.
MARKERS: tuple[Marker, ...] = (
    # -- caps: a step, turn, time, token or cost limit stopped the run --------------------------------
    Marker(r"\bexit_cost\b", "cap_hit", "SWE-agent exit status / closing action"),
    Marker(r"Exit due to cost limit", "cap_hit", "SWE-agent closing response"),
    Marker(r"\bexit_total_execution_time\b|Exit due to total execution time", "cap_hit", "SWE-agent 1.x exit status"),
    Marker(r"\bLimitsExceeded\b", "cap_hit", "mini-swe-agent exit status"),
    Marker(r"Max rounds \(\d+\) reached", "cap_hit", "Magentic-One orchestrator (AutoGen)"),
    Marker(r"Replan counter exceeded", "cap_hit", "Magentic-One orchestrator (AutoGen)"),
    Marker(r"Max time \(\d+s\) reached", "cap_hit", "Magentic-One orchestrator (AutoGen)"),
    Marker(r"\bMax rounds reached\.", "cap_hit", "Magentic-One orchestrator (AutoGen AgentChat 0.4+ stop reason)"),
    Marker(r"(?i)maximum time exceeded|time limit exceeded", "cap_hit", "AutoGen / harness time limit"),
    Marker(r"Maximum number of (messages|turns) \d+ reached", "cap_hit", "AutoGen AgentChat termination"),
    Marker(r"Token usage limit reached, total token count: \d+", "cap_hit",
           "AutoGen AgentChat token usage termination"),
    Marker(r"\bTimeout of [\d.]+ seconds reached", "cap_hit", "AutoGen AgentChat timeout termination"),
    Marker(r"Max turns \(\d+\) exceeded|\bMaxTurnsExceeded\b", "cap_hit", "OpenAI Agents SDK"),
    Marker(r"Reached max steps|\bAgentMaxStepsError\b", "cap_hit", "smolagents"),
    Marker(r"Recursion limit of \d+ reached|\bGraphRecursionError\b", "cap_hit", "LangGraph"),
    Marker(r"Agent stopped due to (iteration limit|max iterations)", "cap_hit", "LangChain AgentExecutor"),
    Marker(r"(?i)agent reached maximum (iteration|budget)", "cap_hit", "OpenHands agent state"),
    Marker(r'"event":\s*"sample_limit"|\bsample_limit\b', "cap_hit", "Inspect AI sample limit event"),
    Marker(r"(?i)\b(message|token|time|working|cost) limit (of [\d,.]+ )?(exceeded|reached)", "cap_hit",
           "Inspect AI limit message"),
    # -- the prompt outgrew the window ---------------------------------------------------------------
    Marker(r"\bexit_context\b|Exit due to context window", "context_bomb", "SWE-agent exit status"),
    Marker(r"\bContextWindowExceededError\b", "context_bomb", "LiteLLM exception (OpenHands, SWE-agent)"),
    Marker(r"\bcontext_length_exceeded\b", "context_bomb", "OpenAI API error code"),
    Marker(r"prompt is too long", "context_bomb", "Anthropic Messages API error"),
    Marker(r"maximum context length is \d+ tokens", "context_bomb", "OpenAI API error message"),
    Marker(r"\bmodel_context_window_exceeded\b", "context_bomb", "Anthropic stop_reason"),
    Marker(r'"stop_reason":\s*"model_length"|\bmodel_length\b', "context_bomb", "Inspect AI stop reason"),
    # -- the model's actions could not be parsed or named no real tool -------------------------------
    Marker(r"\bexit_format\b|Exit due to (repeated )?format", "hallucinated_tool", "SWE-agent exit status"),
    Marker(r"\bModelBehaviorError\b", "hallucinated_tool", "OpenAI Agents SDK (unknown tool, bad JSON)"),
    # -- the framework's own loop detector stopped it ------------------------------------------------
    Marker(r"(?i)agent got stuck in a loop|\bAgentStuckInLoopError\b", "stagnation", "OpenHands stuck detector"),
    # -- ended normally ------------------------------------------------------------------------------
    Marker(r"(?m)^submitted$|\bSubmitted\b", "ok", "SWE-agent / mini-swe-agent exit status"),
    Marker(r"###STOP###", "ok", "tau-bench user simulator"),
    Marker(r"COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "ok", "mini-swe-agent submission command"),
    Marker(r"\bAgentFinishAction\b", "ok", "OpenHands finish action"),
    Marker(r"(?m)\bTERMINATE\s*$", "ok", "AutoGen / AG2 termination word"),
    Marker(r"FINAL ANSWER:", "ok", "Magentic-One / GAIA final answer"),
    Marker(r"(?m)^Final Answer:", "ok", "ReAct (LangChain, smolagents) final answer"),
)

# What a crash leaves in a run's error or its last messages: a Python traceback, an exception's
# ``Type: message`` line, an agent runtime's report of a handler that raised. Searched only there
# (ending.py: the error and the last ``TAIL_STEPS`` steps, whichever agent wrote them), never in
# earlier steps, and only when no normal end is recorded after it: an agent that reads a traceback
# mid-run and then submits ended fine.
EXCEPTION_LINE = Marker(r"(?m)^\s*(?:[\w]+\.)*[A-Z]\w*(?:Error|Exception): \S", "error", "Python exception line")
"""The ``Type: message`` line a traceback ends on: the crash's cause, the evidence ending.py quotes."""
ERROR_MARKERS: tuple[Marker, ...] = (
    Marker(r"Traceback \(most recent call last\)", "error", "Python traceback"),
    EXCEPTION_LINE,
    Marker(r"(?i)\bunhandled (?:exception|error)\b|\bfatal error\b", "error", "runtime crash report"),
    Marker(r"\bError processing publish message\b", "error", "AutoGen core agent runtime (a message handler raised)"),
)

# The tools agent frameworks give the model to end its run: calling one is a normal end, the answer
# in its arguments, whether or not the tool's result was recorded (the run stops as it is called).
# Matched on the tool's name, case-insensitively; a call that failed is not an end.
END_TOOLS: dict[str, str] = {
    "final_answer": "smolagents FinalAnswerTool; ReAct agents",
    "submit": "SWE-agent, Inspect AI basic_agent, tau-style harnesses",
    "finish": "OpenHands AgentFinishAction, OpenAI Agents / ReAct 'finish'",
    "attempt_completion": "Cline / Roo Code",
    "task_complete": "CodeAct-style agents",
    "complete_task": "CodeAct-style agents",
    "final_result": "pydantic-ai output tool",
    "done": "looptrace's own loop; browser-use",
}


def is_end_tool(tool: str | None) -> bool:
    return tool is not None and tool.lower() in END_TOOLS


@dataclass(frozen=True)
class MarkerHit:
    label: str
    format: str
    text: str  # the matched words, for the explanation
    where: str  # "status", "error", "step 31 thought", ...


def find_markers(texts: Iterable[tuple[str, str | None]], status: str | None = None) -> list[MarkerHit]:
    """Every marker in ``texts`` (pairs of where, text) and the run ``status``, in table order."""
    hits: list[MarkerHit] = []
    if status in STATUS_MARKERS:
        hits.append(MarkerHit(STATUS_MARKERS[status], "run status", status, "status"))
    items = [(w, t) for w, t in texts if t]
    if not items:  # most runs of a store: no text to search, only the status
        return hits
    for m in MARKERS:
        rx = m.compiled()
        for where, text in items:
            found = rx.search(text)  # type: ignore[arg-type]
            if found:
                hits.append(MarkerHit(m.label, m.format, found.group(0)[:80], where))
                break
    return hits


# The last steps' texts are searched in Python, ~35 patterns one after the other: most of an analysis
# of short runs went there, though few texts hold any marker. So the analyzer's query keeps a text only
# when it MAY hold one (``MAY_MARK_SQL``, one pass of DuckDB's RE2 over the alternation of every
# pattern) and passes NULL for the rest, which the searches below would find nothing in anyway. To be
# sure of "nothing", the test is a superset of Python's matches: a text with any non-ASCII character is
# always kept (Unicode classes, ``\b`` and case folding differ between the engines), and on ASCII text
# the one remaining difference is ``\s``, which in Python also matches ``\v`` and ``\x1c``-``\x1f``.
_ASCII_SPACE = r"[\t\n\v\f\r\x1c-\x1f ]"


def ascii_superset(pattern: str) -> str:
    """``pattern`` in RE2 syntax, matching on ASCII text wherever Python's ``re`` matches it."""
    flags = re.match(r"\(\?([a-z]+)\)", pattern)
    body = pattern[flags.end():] if flags else pattern
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            pair = body[i:i + 2]
            out.append(_ASCII_SPACE if pair == r"\s" else "[^" + _ASCII_SPACE[1:] if pair == r"\S" else pair)
            i += 2
        else:
            out.append(body[i])
            i += 1
    return f"(?{flags.group(1)}:{''.join(out)})" if flags else f"(?:{''.join(out)})"


_MAY_MARK_RE = "|".join(ascii_superset(m.pattern) for m in (*MARKERS, *ERROR_MARKERS))
# SQL over a text column ``{text}``: true unless the text surely holds no end or crash marker.
MAY_MARK_SQL = ("(strlen({text}) <> length({text}) OR regexp_matches({text}, '"
                + _MAY_MARK_RE.replace("'", "''").replace("{", "{{").replace("}", "}}") + "'))")
