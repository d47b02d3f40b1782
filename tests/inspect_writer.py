"""Inspect AI logs written by the real inspect_ai library, offline: ``python -m tests.inspect_writer DIR``.

An Inspect task with two tools and three samples (two epochs each) runs on Inspect's own mock model,
scripted per sample: ``add`` calls a tool, then one that raises a ToolError, then answers; ``loop``
repeats the same call three times, then answers; ``limit`` never stops calling and hits the task's
message limit. The mock counts tokens with tiktoken, which downloads its encoding; the subclass
below counts 4 characters a token instead, so nothing leaves the machine. It runs in a child process:
Inspect sets up logging, a registry and an event loop we keep out of the test process.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, get_model, modelapi
from inspect_ai.model._providers.mockllm import MockLLM
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, use_tools
from inspect_ai.tool import ToolError, tool

MODEL = "looptrace-mock/scripted"
MESSAGE_LIMIT = 8


@modelapi(name="looptrace-mock")
class OfflineMock(MockLLM):
    async def count_text_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)


@tool
def add() -> Any:
    async def execute(x: int, y: int) -> int:
        """Add two numbers.

        Args:
            x: First number.
            y: Second number.
        """
        return x + y
    return execute


@tool
def divide() -> Any:
    async def execute(x: int, y: int) -> float:
        """Divide x by y.

        Args:
            x: Dividend.
            y: Divisor.
        """
        if y == 0:
            raise ToolError("division by zero")
        return x / y
    return execute


def script(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
    task = messages[0].text
    calls = sum(1 for m in messages if m.role == "assistant")
    if task.startswith("Add"):
        if calls == 0:
            return ModelOutput.for_tool_call(MODEL, "add", {"x": 1, "y": 2})
        if calls == 1:
            return ModelOutput.for_tool_call(MODEL, "divide", {"x": 1, "y": 0})
        return ModelOutput.from_content(MODEL, "The answer is 3.\nChecked twice.")
    if task.startswith("Loop"):
        if calls < 3:
            return ModelOutput.for_tool_call(MODEL, "add", {"x": 2, "y": 2})
        return ModelOutput.from_content(MODEL, "4, I think")
    return ModelOutput.for_tool_call(MODEL, "add", {"x": calls, "y": 1})  # never stops


def write_logs(folder: Path, log_format: str) -> Path:
    task = Task(
        dataset=[Sample(id="add", input="Add 1 and 2.", target="3", metadata={"difficulty": "easy"}),
                 Sample(id="loop", input="Loop on 2+2.", target="4"),
                 Sample(id="limit", input="Count forever.", target="never")],
        solver=[use_tools(add(), divide()), generate()], scorer=includes(), message_limit=MESSAGE_LIMIT, epochs=2,
    )
    model = get_model(MODEL, custom_outputs=script)
    (log,) = inspect_eval(task, model=model, log_dir=str(folder), log_format=log_format, display="none")
    return Path(log.location)


if __name__ == "__main__":
    for fmt in sys.argv[2:] or ["eval", "json"]:
        print(write_logs(Path(sys.argv[1]), fmt))
