"""The HTTP plumbing the local servers share (the Messages API server, the OTLP receiver).

Both answer on 127.0.0.1 with keep-alive and Nagle off, keep request logs silent, and close idle
keep-alive connections when they stop: a pooled client would otherwise still be answered by a
connection's own thread after the server stopped.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["LoopbackServer", "TrackedHandler"]


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog: socketserver's default of 5 refused or stalled most of a burst of 1,000
    # concurrent senders (633 answered in 60 s). The kernel caps it at net.core.somaxconn.
    request_queue_size = 4096

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], *, owner: Any) -> None:
        self.owner = owner
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(address, handler)

    def track(self, connection: socket.socket, *, add: bool) -> None:
        with self._connections_lock:
            (self._connections.add if add else self._connections.discard)(connection)

    def close(self) -> None:
        """Stop serving, release the port, and end every open connection."""
        self.shutdown()
        self.server_close()
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

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
        self.server.track(self.connection, add=True)

    def finish(self) -> None:
        self.server.track(self.connection, add=False)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass
