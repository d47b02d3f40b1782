"""A scripted Anthropic Messages API on 127.0.0.1, for offline tests, the demo and replay.

Why a real HTTP server rather than a fake client object: the agent loop, the tracer's instrumentation
and the replayer all sit on top of the real `anthropic` SDK. Pointing that SDK at `base_url` exercises
everything a live run does (request building, retries and their backoff, `retry-after`, SSE parsing,
error classes, timeouts) without patching any of it. Nothing here touches the network beyond loopback.

Why every response goes out in one `write`: the stock `BaseHTTPRequestHandler` writes the status line,
headers and body in separate small sends. With Nagle's algorithm on, the second small send waits for
the client's ACK of the first, and the client delays that ACK (~40 ms on Linux), so each SDK call costs
~48 ms. We disable Nagle (`TCP_NODELAY`) *and* assemble each response (or each SSE event) into a single
buffer, which brings a call under 1 ms on loopback. Keep-alive (`HTTP/1.1`) saves a TCP handshake per
call, and streams use chunked encoding so their connection is reused too.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Sequence
from http import HTTPStatus
from types import TracebackType
from typing import Any, Self

from looptrace.tracer.loopback import LoopbackServer, TrackedHandler

from .replies import (
    Disconnect,
    Fault,
    Handler,
    Reply,
    ScriptItem,
    StreamError,
    error_body,
    estimate_input_tokens,
    message_body,
    partial_stream_events,
    stream_events,
)

__all__ = ["Disconnect", "Fault", "Handler", "MessagesServer", "Reply", "ScriptItem", "StreamError"]

_MESSAGES = "/v1/messages"
_COUNT_TOKENS = "/v1/messages/count_tokens"
_EXTRA_REASONS = {529: "Overloaded"}
_Event = tuple[str, dict[str, Any]]


class _ScriptFault(Fault):
    """A fault caused by the script itself: retrying cannot help, so the SDK is told not to."""


class MessagesServer:
    """Serve `script` as the Messages API: a handler called per request, or a sequence used in order.

    A sequence item is consumed by every `POST /v1/messages`, retries included; past the end the
    server answers 500 "script exhausted after N responses". A handler is called under a lock, so it
    may keep state without locking of its own. `count_tokens` never consumes the script.
    `requests` logs every request received, in order, as {"path", "headers" (lowercased), "body"};
    `body` is None when it was not JSON.
    """

    def __init__(
        self,
        script: Handler | Sequence[ScriptItem],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._handler: Handler | None = script if callable(script) else None
        self._script: tuple[ScriptItem, ...] = () if callable(script) else tuple(script)
        self._address = (host, port)
        self._lock = threading.Lock()
        self._served = 0  # POST /v1/messages seen so far: the script position and the message id
        self._stopped = threading.Event()
        self._http: LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[dict[str, Any]] = []

    @property
    def base_url(self) -> str:
        if self._http is None:
            raise RuntimeError("MessagesServer is not running; call start() first")
        return f"http://{self._address[0]}:{self._http.server_port}"

    def start(self) -> Self:
        if self._http is not None or self._stopped.is_set():
            raise RuntimeError("a MessagesServer can be started once")
        self._http = LoopbackServer(self._address, _RequestHandler, owner=self)
        # shutdown() waits up to one poll interval; the default 0.5 s would dominate a fast test suite.
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, name="looptrace-messages-server"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._http is None:
            return
        self._http.close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # -- called from request threads ------------------------------------------------------------------

    def _record(self, path: str, headers: dict[str, str], body: Any) -> str:
        with self._lock:
            self.requests.append({"path": path, "headers": headers, "body": body})
            return f"req_{len(self.requests):024d}"

    def _next(self, body: dict[str, Any]) -> tuple[ScriptItem, int]:
        with self._lock:
            self._served += 1
            if self._handler is None:
                if self._served > len(self._script):
                    message = f"script exhausted after {len(self._script)} responses"
                    return _ScriptFault(500, "api_error", message), self._served
                return self._script[self._served - 1], self._served
            try:
                item = self._handler(body)
            except Exception as err:  # noqa: BLE001 - reported in the 500 body, where a failing test looks
                return _ScriptFault(500, "api_error", f"script handler raised {err!r}"), self._served
        if not isinstance(item, ScriptItem):
            message = (
                f"script handler returned {type(item).__name__}, not Reply | Fault | StreamError | Disconnect"
            )
            return _ScriptFault(500, "api_error", message), self._served
        return item, self._served


class _RequestHandler(TrackedHandler):

    def _dispatch(self) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        problem = "request body must be a JSON object"
        try:
            body: Any = json.loads(raw)
        except ValueError as err:
            body, problem = None, f"malformed JSON body: {err}"
        headers = {name.lower(): value for name, value in self.headers.items()}
        request_id = owner._record(self.path, headers, body)
        path = self.path.partition("?")[0]
        if self.command != "POST" or path not in (_MESSAGES, _COUNT_TOKENS):
            self._send_fault(Fault(404, "not_found_error", f"Not found: {self.command} {path}"), request_id)
        elif not isinstance(body, dict):
            self._send_fault(Fault(400, "invalid_request_error", problem), request_id)
        elif path == _COUNT_TOKENS:
            self._send_json(200, {"input_tokens": estimate_input_tokens(body)}, request_id)
        else:
            item, served = owner._next(body)
            self._answer(item, body, f"msg_{served:024d}", request_id)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _dispatch

    def _answer(self, item: ScriptItem, body: dict[str, Any], message_id: str, request_id: str) -> None:
        streaming = body.get("stream") is True
        if isinstance(item, Disconnect):
            self._reset()
        elif isinstance(item, Fault):
            self._send_fault(item, request_id)
        elif isinstance(item, StreamError) and streaming:
            self._send_events(
                partial_stream_events(item, body, message_id, request_id), request_id, close=True
            )
        elif isinstance(item, StreamError):
            self._send_fault(Fault(529, "overloaded_error", "Overloaded"), request_id)
        else:
            if item.delay > 0:
                self.server.owner._stopped.wait(item.delay)
            message = message_body(item, body, message_id)
            if streaming:
                self._send_events(stream_events(message), request_id)
            else:
                self._send_json(200, message, request_id)

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = _EXTRA_REASONS.get(status, "Error")
        if self.close_connection:
            headers["connection"] = "close"
        lines = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in headers.items())]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _send_json(
        self, status: int, payload: object, request_id: str, extra: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        headers = {
            "content-type": "application/json",
            "content-length": str(len(data)),
            "request-id": request_id,
        }
        self.wfile.write(self._head(status, {**headers, **(extra or {})}) + data)

    def _send_fault(self, fault: Fault, request_id: str) -> None:
        extra = {}
        if fault.retry_after is not None:
            extra["retry-after"] = f"{fault.retry_after:g}"
        if isinstance(fault, _ScriptFault):
            extra["x-should-retry"] = "false"
        self._send_json(
            fault.status, error_body(fault.error_type, fault.message, request_id), request_id, extra
        )

    def _send_events(self, events: list[_Event], request_id: str, *, close: bool = False) -> None:
        if close:
            self.close_connection = True
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
            "request-id": request_id,
        }
        writes = []
        for name, data in events:
            frame = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
            writes.append(b"%x\r\n%s\r\n" % (len(frame), frame))
        writes[0] = self._head(200, headers) + writes[0]
        writes[-1] += b"0\r\n\r\n"
        for chunk in writes:
            self.wfile.write(chunk)

    def _reset(self) -> None:
        # SO_LINGER 0 turns close() into a TCP RST: the client sees "connection reset", not a clean EOF.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.rfile.close()  # the makefile() reader holds the fd open past close() otherwise
        self.connection.close()
        self.close_connection = True
