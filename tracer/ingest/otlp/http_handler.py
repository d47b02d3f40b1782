"""The OTLP/HTTP side of the receiver: ``POST /v1/traces`` and ``/v1/logs``, framing, limits and answers.

Split from ``receiver.py`` so the receiver is the buffer, the journal and the writes, and this is only
HTTP: a request is read whole (whatever the answer, so a kept-alive connection stays usable), decoded
by ``protocol.py`` and handed to ``OtlpReceiver.ingest``; refusals are 4xx with an OTLP ``Status``
body, spans that cannot be kept a 503 with ``Retry-After``. Responses go out in one write with Nagle
off, as in ``loop/server.py``.
"""

from __future__ import annotations

import contextlib
import logging
from http import HTTPStatus

from ...loopback import TrackedHandler
from . import protocol as otlp
from .logs_protocol import LOGS_PATH, decode_logs, logs_response_body

__all__ = ["OtlpHttpHandler", "TRACES_PATH", "LOGS_PATH", "BODY_TIMEOUT"]

log = logging.getLogger("looptrace.ingest")

TRACES_PATH = "/v1/traces"
BODY_TIMEOUT = 10.0  # seconds a half-sent body may stay silent before it is refused
_DRAIN_MAX = 1 << 30  # an over-limit body is read and discarded up to this size, so the client sees the 413


class _LengthRequired(otlp.IngestError):
    status = 411


class OtlpHttpHandler(TrackedHandler):
    """One OTLP/HTTP connection; ``self.server.owner`` is the ``OtlpReceiver`` it feeds."""

    def handle_expect_100(self) -> bool:
        # A client that asks first (curl does for large bodies) is refused before it sends an oversized one.
        limit = self.server.owner.max_body
        length = self.headers.get("content-length") or ""
        if length.isdigit() and int(length) > limit:
            self.server.owner._rejected()
            self.close_connection = True
            media = self._reply_media()
            message = f"body of {length} bytes is over the {limit}-byte limit"
            self._send(413, otlp.response_body(media, 413, message), media)
            return False
        return super().handle_expect_100()

    def _reply_media(self) -> str:
        """The encoding to answer in: the request's, when it is one of OTLP's, else JSON."""
        try:
            return otlp.media_type(self.headers.get("content-type"))
        except otlp.IngestError:
            return otlp.JSON

    def do_POST(self) -> None:
        owner = self.server.owner
        media = self._reply_media()
        try:
            # Read first, whatever the answer: an unread body would be parsed as the next request on a
            # kept-alive connection, which is how OTLP exporters send.
            body = self._body(owner.max_body, required=True)
            path = self.path.partition("?")[0]
            if path not in _PATHS:
                raise _NotFound(f"no such endpoint: POST {self.path}; {_WHERE}")
            encoding = self.headers.get("content-encoding")
            if path == LOGS_PATH:
                _, logs = decode_logs(body, self.headers.get("content-type"), encoding, owner.max_body)
                accepted = owner.ingest_logs(logs)
            else:
                _, spans = otlp.decode(body, self.headers.get("content-type"), encoding, owner.max_body)
                accepted = owner.ingest(spans)
        except otlp.IngestError as exc:
            owner._rejected()
            self._send(exc.status, otlp.response_body(media, exc.status, str(exc)), media)
            return
        except Exception as exc:  # noqa: BLE001 - a bug here is reported to the client, and the server goes on
            log.exception("looptrace collect: request failed")
            owner._rejected()
            message = f"internal error: {type(exc).__name__}: {exc}"
            self._send(500, otlp.response_body(media, 500, message), media)
            return
        if accepted:
            ok = logs_response_body(media) if path == LOGS_PATH else otlp.response_body(media)
            self._send(200, ok, media)
        else:
            owner._rejected()
            message = f"could not write to the store: {owner.stats.last_error}"
            self._send(503, otlp.response_body(media, 503, message), media, {"retry-after": "1"})

    def _other(self) -> None:
        owner = self.server.owner
        owner._rejected()
        try:
            self._body(owner.max_body)  # as in do_POST: the connection must stay usable
        except otlp.IngestError:
            self.close_connection = True
        path = self.path.partition("?")[0]
        status, message = (405, f"{self.command} not allowed: use POST") if path in _PATHS else \
            (404, f"no such endpoint: {self.command} {path}; {_WHERE}")
        media = self._reply_media()
        self._send(status, otlp.response_body(media, status, message), media,
                   {"allow": "POST"} if status == 405 else None)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _other

    def _body(self, limit: int, *, required: bool = False) -> bytes:
        # A sender that promises more bytes than it sends would hold its thread forever: each read of
        # the body gives up after BODY_TIMEOUT idle seconds. Idle keep-alive connections are not timed.
        self.connection.settimeout(BODY_TIMEOUT)
        try:
            return self._read_body(limit, required=required)
        except (TimeoutError, OSError) as exc:
            # A body that stops coming (a lying Content-Length, a stalled chunk) is the sender's fault: a
            # 4xx, and the connection is closed since where the next request starts is unknown.
            self.close_connection = True
            raise otlp.MalformedRequest(f"body not received: {type(exc).__name__}") from None
        finally:
            with contextlib.suppress(OSError):
                self.connection.settimeout(None)

    def _read_body(self, limit: int, *, required: bool) -> bytes:
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            return self._chunked(limit)
        raw = self.headers.get("content-length")
        if raw is None:
            if required:  # no length and no chunking: the body's end is unknowable
                self.close_connection = True
                raise _LengthRequired("Content-Length (or chunked transfer encoding) is required")
            return b""
        try:
            length = int(raw)
        except ValueError:
            self.close_connection = True
            raise otlp.MalformedRequest("Content-Length is not a number") from None
        if length < 0 or not raw.strip().isdigit():
            self.close_connection = True
            raise otlp.MalformedRequest(f"Content-Length {raw.strip()!r} is not a byte count")
        if length > limit:
            self._drain(length)
            raise otlp.RequestTooLarge(f"body of {length} bytes is over the {limit}-byte limit")
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            raise otlp.MalformedRequest(f"body ended after {len(body)} of {length} bytes")
        return body

    def _chunked(self, limit: int) -> bytes:
        body = bytearray()
        while True:
            line = self.rfile.readline(1024)
            try:
                text = line.split(b";", 1)[0].strip()
                size = int(text, 16)
                if not text or not all(c in b"0123456789abcdefABCDEF" for c in text):
                    raise ValueError(text)  # int() also takes "-5", "+5", "0x5" and "1_0"
            except ValueError:
                self.close_connection = True
                raise otlp.MalformedRequest("malformed chunked body") from None
            if size == 0:
                while self.rfile.readline(1024).strip():
                    pass  # trailers
                return bytes(body)
            if len(body) + size > limit:
                self.close_connection = True
                raise otlp.RequestTooLarge(f"chunked body is over the {limit}-byte limit")
            chunk = self.rfile.read(size)
            if len(chunk) < size or self.rfile.readline(1024) not in (b"\r\n", b"\n"):
                self.close_connection = True
                raise otlp.MalformedRequest("malformed chunked body")
            body += chunk

    def _drain(self, length: int) -> None:
        """Read and discard an over-limit body, so closing the socket does not reset the connection under
        the client before it reads the 413; a body too large even to drain closes it at once."""
        self.close_connection = True
        if length > _DRAIN_MAX:
            return
        self.connection.settimeout(5.0)
        with contextlib.suppress(OSError):
            while length > 0:
                chunk = self.rfile.read(min(length, 1 << 20))
                if not chunk:
                    break
                length -= len(chunk)

    def _send(self, status: int, body: bytes, media: str, extra: dict[str, str] | None = None) -> None:
        headers = {"content-type": media, "content-length": str(len(body)), **(extra or {})}
        if self.close_connection:
            headers["connection"] = "close"
        lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", *(f"{k}: {v}" for k, v in headers.items())]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.wfile.write(head if self.command == "HEAD" else head + body)


_PATHS = (TRACES_PATH, LOGS_PATH)
_WHERE = f"OTLP traces go to POST {TRACES_PATH}, logs to POST {LOGS_PATH}"


class _NotFound(otlp.IngestError):
    status = 404
