"""A TCP relay on a port of its own, for tests that kill a server and start it again.

Agents' exporters are given one endpoint for their whole life, but a server started again should take
a port the kernel chooses (``--port 0``) and report it: a port picked by the test, freed, and bound
again later can be taken meanwhile by anything else running on the machine (another test worker).
The relay's listening socket is bound once, for the test's life; each connection it accepts is joined
to the server's current port (``upstream``), or closed at once while there is none, as a refused
connection would be.

It can also kill the server *at an answer* (``arm``): the first bytes the server writes back after
arming are held, the kill callback runs (SIGKILL, and the wait for the process to end), and only then
are the bytes passed on. The client holds an acknowledgement from a server that is already dead: a
server that answers before its journal write is durable loses those spans every time, where a kill
at a random moment hits that window only by luck. For HTTP/1.1 an answer is the server's first bytes
after a request; for HTTP/2 (gRPC) it is a HEADERS frame that ends its stream (the trailers carrying
``grpc-status``), found by reading the frame headers.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

__all__ = ["Relay"]

_HTTP2_HEADERS, _END_STREAM = 0x1, 0x1


class Relay:
    """``Relay(http2=False)``; ``with relay:`` serves until the block ends. ``relay.port`` is the fixed port."""

    def __init__(self, *, http2: bool = False) -> None:
        self.http2 = http2
        self.upstream: int | None = None
        self.kills = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._armed: Callable[[], None] | None = None
        self._fired = threading.Event()
        self._open: set[socket.socket] = set()
        self._stopped = False

    def __enter__(self) -> Relay:
        threading.Thread(target=self._accept, daemon=True, name=f"relay-{self.port}").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self.drop_connections()

    def arm(self, kill: Callable[[], None]) -> threading.Event:
        """Run ``kill`` before the next answer is passed on; the event is set once it has run."""
        with self._lock:
            self._armed, self._fired = kill, threading.Event()
            return self._fired

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def drop_connections(self) -> None:
        """Close every relayed connection (the server behind them is gone)."""
        with self._lock:
            sockets, self._open = list(self._open), set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._join, args=(client,), daemon=True).start()

    def _join(self, client: socket.socket) -> None:
        port = self.upstream
        try:
            if port is None:
                raise ConnectionRefusedError
            server = socket.create_connection(("127.0.0.1", port), timeout=5)
            server.settimeout(None)
        except OSError:
            client.close()
            return
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._open |= {client, server}
        threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
        self._pump(server, client, True)

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        pending = b""  # HTTP/2: the bytes of a frame not yet whole
        try:
            while data := src.recv(65536):
                if answers:
                    if self.http2:
                        pending += data
                        data, pending = _whole_frames(pending)
                        if _ends_a_stream(data):
                            self._fire()
                    else:
                        self._fire()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _fire(self) -> None:
        with self._lock:
            kill, self._armed = self._armed, None
            fired = self._fired
        if kill is not None:
            kill()
            self.kills += 1
            fired.set()


def _whole_frames(buffer: bytes) -> tuple[bytes, bytes]:
    """The HTTP/2 frames that are whole at the start of ``buffer`` (after the preface-free server side),
    and the rest."""
    at = 0
    while len(buffer) - at >= 9:
        length = int.from_bytes(buffer[at:at + 3], "big")
        if len(buffer) - at < 9 + length:
            break
        at += 9 + length
    return buffer[:at], buffer[at:]


def _ends_a_stream(frames: bytes) -> bool:
    at = 0
    while at < len(frames):
        length = int.from_bytes(frames[at:at + 3], "big")
        kind, flags, stream = frames[at + 3], frames[at + 4], struct.unpack(">I", frames[at + 5:at + 9])[0]
        if kind == _HTTP2_HEADERS and flags & _END_STREAM and stream & 0x7FFFFFFF:
            return True
        at += 9 + length
    return False
