"""The HTTP plumbing the local servers share (the Messages API server, the OTLP receiver).

Both answer on 127.0.0.1 with keep-alive and Nagle off, keep request logs silent, and close idle
keep-alive connections when they stop: a pooled client would otherwise still be answered by a
connection's own thread after the server stopped.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["LoopbackServer", "TrackedHandler", "LoopbackService"]


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

    # What the scripted model servers (Chat Completions, Responses, Gemini) each wrote alike: read a JSON
    # body, send one whole response. Each API's own error shapes and paths stay in its server.
    def read_json(self) -> Any:
        """The request's body as JSON; None when it is not JSON (the server answers that with a 400)."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def send(self, status: int, content_type: str, data: bytes) -> None:
        """One whole response with its length, so the connection stays open for the next request."""
        head = (f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\ncontent-type: {content_type}\r\n"
                f"content-length: {len(data)}\r\n\r\n").encode()
        self.wfile.write(head + data)

    def send_json(self, status: int, payload: Any) -> None:
        self.send(status, "application/json", json.dumps(payload).encode())


class LoopbackService:
    """A ``LoopbackServer`` on a thread of its own, started and stopped as a context manager: the shell
    the scripted model servers share (Chat Completions, Responses, Gemini). A subclass names its
    request handler class; the handler reaches the service as ``self.server.owner``."""

    request_handler: type[BaseHTTPRequestHandler]
    thread_name = "looptrace-loopback-server"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._address = (host, port)
        self._lock = threading.Lock()
        self._http: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[Any] = []

    @property
    def root_url(self) -> str:
        """``http://host:port``, the port the kernel gave when asked for 0."""
        if self._http is None:
            raise RuntimeError(f"{type(self).__name__} is not running; call start() first")
        return f"http://{self._address[0]}:{self._http.server_port}"

    def start(self) -> Self:
        self._http = LoopbackServer(self._address, self.request_handler, owner=self)
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.02},
                                        name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
