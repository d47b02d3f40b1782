"""The plain data the rules read (``RunView`` of ``StepView``) and what they return (``Diagnosis``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any

from looptrace.tracer.records.actions import call_action, call_key

from .markers import TAIL_STEPS, MarkerHit, find_markers

__all__ = ["StepView", "RunView", "Diagnosis", "describe_action"]

_STEP = attrgetter("step")
_ARGS_WIDTH = 80  # an action's arguments in an explanation: enough to recognise the command


@dataclass(frozen=True)
class StepView:
    """One action (a tool call) of a step; a step with no tool call has ``tool`` None."""

    step: int
    tool: str | None = None
    args: str | None = None  # JSON text
    observation_key: str | None = None  # equal keys: the same observation but for clock readings, ids
    observation_bytes: int = 0
    is_error: bool = False
    error_type: str | None = None
    context_tokens: int | None = None
    call_index: int = 0
    action_key: str | None = None  # the store's key for this call (records/actions.py)
    end_text: str | None = None  # thought, observation and events of the run's last steps, if they may hold markers
    near_key: str | None = None  # equal keys: the same words, only numbers differ (records/actions.py)
    tokens: int | None = None  # the step's input + output tokens, on its first call only (None: unknown)
    cost_usd: float | None = None  # the step's cost, on its first call only (None: unknown)

    @cached_property
    def action(self) -> str | None:
        """Equal for the same tool with the same arguments, as everywhere in looptrace (computed once:
        stores written before action keys existed have none, and every rule asks)."""
        if self.tool is None:
            return None
        return self.action_key if self.action_key is not None else call_key(self.tool, self.args)

    def outcome(self, near_min_bytes: int) -> tuple[str | None, bool]:
        """What came back, for "did repeating it make progress": the observation (near-same when it is
        at least ``near_min_bytes`` long) and whether it failed."""
        near = self.near_key is not None and self.observation_bytes >= near_min_bytes
        return (self.near_key if near else self.observation_key), self.is_error


@dataclass(frozen=True)
class RunView:
    run_id: str
    status: str
    steps: tuple[StepView, ...]
    model: str | None = None
    error: str | None = None
    answer: str | None = None
    attributes: str | None = None  # JSON text of the run's recorded attributes

    def end_texts(self) -> list[tuple[str, str | None]]:
        """(where, text) of every place an end marker is looked for: the run's error, answer (its
        beginning and end), attributes and its last ``TAIL_STEPS`` steps."""
        texts: list[tuple[str, str | None]] = [("error", self.error), ("answer", _ends(self.answer)),
                                               ("attributes", _attribute_text(self.attributes))]
        last = max(map(_STEP, self.steps), default=0)
        texts += [(f"step {s.step}", s.end_text) for s in self.steps if s.step > last - TAIL_STEPS]
        return texts

    @cached_property
    def markers(self) -> list[MarkerHit]:
        """End markers (markers.py) in the run's status, error, answer, attributes and last steps."""
        return find_markers(self.end_texts(), self.status)

    def marked(self, label: str) -> MarkerHit | None:
        return next((m for m in self.markers if m.label == label), None)

    @cached_property
    def attribute_values(self) -> dict[str, Any]:
        """The run's recorded attributes, parsed (empty when none or not a JSON object)."""
        return _attributes(self.attributes)

    @cached_property
    def window(self) -> int | None:
        """The context window the trace itself records, if any."""
        attrs = _attributes(self.attributes)
        for key in ("context_window", "gen_ai.request.max_input_tokens", "max_input_tokens"):
            value = attrs.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None


@dataclass(frozen=True)
class Diagnosis:
    label: str
    first_step: int | None
    last_step: int | None
    explanation: str
    evidence: dict[str, Any] = field(default_factory=dict)
    is_primary: bool = False


def describe_action(s: StepView) -> str:
    """``tool {args}`` clipped to a readable width, for explanations."""
    text = call_action(s.tool, s.args) or "(no tool)"
    return text if len(text) <= _ARGS_WIDTH else text[:_ARGS_WIDTH - 1] + "…"


def _ends(text: str | None, n: int = 500) -> str | None:
    """A long text's beginning and end: where frameworks put why they stopped."""
    if text is None or len(text) <= 2 * n:
        return text
    return text[:n] + "\n" + text[-n:]


def _attributes(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _attribute_text(text: str | None) -> str | None:
    """Attribute values one per line (keys are ours, values are what the source recorded)."""
    values = [v for v in _attributes(text).values() if isinstance(v, str)]
    return "\n".join(values) or None
