"""Orchestrator-workers: a ``spawn_subagent`` tool that runs an isolated loop and returns its answer.

A sub-agent has its own caps and budget and sees only the tools it is given; its run is traced as
its own run linked to the caller by ``parent_run_id``. Several spawn calls in one response run in
parallel, like any tool calls.
"""

from __future__ import annotations

from dataclasses import replace

from looptrace.tracer import Run

from .agent import Agent, ToolFactory
from .policy import Policy
from .tools import Tool, ToolError

__all__ = ["subagents"]


def subagents(worker: Agent, policy: Policy | None = None) -> ToolFactory:
    """A tool factory for ``Agent.tool_factories``: sub-agents are copies of ``worker``."""
    available = {t.name: t for t in worker.tools}

    def factory(parent: Run) -> Tool:
        def spawn(task: str, tools: list[str] | None = None) -> str:
            unknown = sorted(set(tools or ()) - set(available))  # tools=None: all; tools=[]: none
            if unknown:
                raise ToolError(f"unknown tools for a sub-agent: {', '.join(unknown)}; available: "
                                f"{', '.join(sorted(available))}")
            chosen = list(available.values()) if tools is None else [available[n] for n in tools]
            child = replace(worker, tools=chosen, policy=policy or worker.policy, tool_factories=(),
                            name=f"{worker.name}-worker")
            result = child.run(task, parent=parent, strategy="subagent")
            if not result.ok:
                raise ToolError(f"sub-agent stopped with status {result.status}: {result.error}")
            return result.answer or ""

        return Tool(
            "spawn_subagent",
            "Delegate a self-contained sub-task to a new agent with its own budget. It sees only `task` "
            "and the `tools` you name, and returns only its final answer.",
            {"type": "object", "additionalProperties": False, "required": ["task"],
             "properties": {"task": {"type": "string"},
                            "tools": {"type": "array", "items": {"type": "string", "enum": sorted(available)}}}},
            spawn,
        )

    return factory
