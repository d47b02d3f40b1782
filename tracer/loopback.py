"""The HTTP plumbing the local servers share (the Messages API server, the OTLP receiver).

Both answer on 127.0.0.1 with keep-alive, Nagle off, silent request logs, and track their open
connections so ``stop()`` can close idle keep-alive ones (a pooled client would otherwise still be
answered after the server stopped). The owner supplies ``_track(connection, add=...)``.
"""

from __future__ import annotations

import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

__all__ = ["Owner", "LoopbackServer", "TrackedHandler"]


class Owner(Protocol):
    def _track(self, connection: Any, *, add: bool) -> None: ...


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, owner: Any) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out or hung up leaves a broken pipe behind: expected, not worth a traceback.
        # Anything else is a bug and should be seen.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class TrackedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: LoopbackServer

    def setup(self) -> None:
        super().setup()
        self.server.owner._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.owner._track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass
