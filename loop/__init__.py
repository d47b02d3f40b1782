"""looptrace's agent runtime: a ReAct loop over the real ``anthropic`` SDK, every step traced.

This package also ships the offline pieces the loop runs on: a Messages API server on 127.0.0.1
that serves scripted responses (``loop.server``), the scripted model and the demo scenarios.
"""

from __future__ import annotations

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
