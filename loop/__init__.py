"""looptrace's agent runtime: a ReAct loop over the real ``anthropic`` SDK, every step traced.

This package also ships the offline pieces the loop runs on: a Messages API server on 127.0.0.1
that serves scripted responses (``loop.server``), the scripted model and the demo scenarios.

Names are imported on first use (``looptrace.tracer.lazy``): the CLI imports ``loop.commands`` to
list its commands, and must not pay for the anthropic SDK (about a second) to do it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from looptrace.tracer.lazy import lazy_exports

if TYPE_CHECKING:
    from .agent import Agent
    from .model import AnthropicModel, Model, ModelError, RetryPolicy
    from .policy import Policy
    from .result import RunResult
    from .server import Disconnect, Fault, MessagesServer, Reply, StreamError
    from .tools import Tool, ToolError, ToolResult, Toolbox

__all__ = [
    "Agent", "AnthropicModel", "Model", "ModelError", "RetryPolicy", "Policy", "RunResult",
    "Tool", "ToolError", "ToolResult", "Toolbox",
    "MessagesServer", "Reply", "Fault", "StreamError", "Disconnect",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "Agent": ".agent",
    **dict.fromkeys(("AnthropicModel", "Model", "ModelError", "RetryPolicy"), ".model"),
    "Policy": ".policy",
    "RunResult": ".result",
    **dict.fromkeys(("Disconnect", "Fault", "MessagesServer", "Reply", "StreamError"), ".server"),
    **dict.fromkeys(("Tool", "ToolError", "ToolResult", "Toolbox"), ".tools"),
})
