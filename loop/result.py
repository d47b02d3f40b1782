"""What a run returns, and the typed stop that ends it.

A run never ends silently: ``RunResult`` always carries the status, the answer if any, the step
count, tokens, cost and the full message history, whichever way the run stopped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Stop", "RunResult"]


class Stop(Exception):
    """Raised inside the loop to end a run with ``status``; the message is for humans."""

    def __init__(self, status: str, message: str = "", *, answer: str | None = None) -> None:
        super().__init__(message or status)
        self.status = status
        self.message = message
        self.answer = answer


@dataclass
class RunResult:
    run_id: str
    status: str
    answer: str | None
    steps: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    messages: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    reflections: int = 0
    children: list[RunResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"
