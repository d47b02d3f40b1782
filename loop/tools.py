"""The tool seam: what the loop knows about a tool, and how a call becomes an observation.

A tool is plain data plus a function. The loop never lets a tool call crash it: an unknown name,
arguments that fail the JSON Schema, or an exception in the tool all become error observations the
model can read and recover from, each with an ``error_type`` the trace records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from looptrace.tracer.records.conventions import INVALID_ARGUMENTS, TOOL_NOT_FOUND

__all__ = ["Tool", "ToolError", "ToolResult", "Toolbox", "TOOL_NOT_FOUND", "INVALID_ARGUMENTS"]


class ToolError(Exception):
    """Raised by a tool to report a failure to the model (the message is the observation)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: Mapping[str, Any]
    run: Callable[..., str | ToolResult]  # called with the validated arguments as keyword arguments

    def spec(self) -> dict[str, Any]:
        """The tool as the Messages API ``tools`` entry."""
        return {"name": self.name, "description": self.description, "input_schema": dict(self.input_schema)}


@dataclass(frozen=True)
class ToolResult:
    text: str
    is_error: bool = False
    error_type: str | None = None


class Toolbox:
    """The tools of one loop, by name."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools are named {tool.name!r}")
            jsonschema.Draft202012Validator.check_schema(dict(tool.input_schema))
            self.tools[tool.name] = tool

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def with_tools(self, extra: Iterable[Tool]) -> Toolbox:
        return Toolbox([*self.tools.values(), *extra])

    def only(self, names: Iterable[str]) -> Toolbox:
        wanted = set(names)
        return Toolbox(t for n, t in self.tools.items() if n in wanted)

    def call(self, name: str, args: Any) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolResult(f"Error: there is no tool named {name!r}. Available tools: {known}.", True,
                              TOOL_NOT_FOUND)
        if not isinstance(args, Mapping):
            return ToolResult(f"Error: arguments for {name} must be a JSON object, got {type(args).__name__}.",
                              True, INVALID_ARGUMENTS)
        errors = sorted(jsonschema.Draft202012Validator(dict(tool.input_schema)).iter_errors(dict(args)),
                        key=lambda e: list(e.path))
        if errors:
            detail = "; ".join(f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message}" for e in errors[:5])
            return ToolResult(f"Error: invalid arguments for {name}: {detail}", True, INVALID_ARGUMENTS)
        try:
            result = tool.run(**args)
            return result if isinstance(result, ToolResult) else ToolResult(str(result))
        except ToolError as exc:
            return ToolResult(f"Error: {exc}", True, "tool_error")
        except Exception as exc:  # noqa: BLE001 - a tool's bug is an observation, never a crash
            return ToolResult(f"Error: {name} failed: {type(exc).__name__}: {exc}", True, type(exc).__name__)
