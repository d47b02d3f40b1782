"""looptrace's agent runtime: a ReAct loop over the real ``anthropic`` SDK, every step traced.

This package also ships the offline pieces the loop runs on: a Messages API server on 127.0.0.1
that serves scripted responses (``loop.server``).
"""

from __future__ import annotations

from .server import Disconnect, Fault, MessagesServer, Reply, StreamError

__all__ = ["MessagesServer", "Reply", "Fault", "StreamError", "Disconnect"]
