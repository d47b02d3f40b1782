"""OTLP/gRPC beside OTLP/HTTP: the collector ``TraceService`` and ``LogsService`` on grpcio, feeding the same receiver.

Many OpenTelemetry SDKs default to gRPC on port 4317, and the Collector's ``loadbalancing`` exporter
sends nothing else. The service is the stub that ``opentelemetry-proto`` ships; a request is decoded
by the same ``spans_of`` as an HTTP body and handed to the same ``OtlpReceiver.ingest`` (journal,
buffer, sink), so limits, durability and refusals are the HTTP path's, mapped to gRPC status codes:
a malformed request is INVALID_ARGUMENT (HTTP 400), an oversized one RESOURCE_EXHAUSTED (413, refused
by grpcio itself through ``grpc.max_receive_message_length``), spans that cannot be kept UNAVAILABLE
with a ``RetryInfo`` (503 with ``Retry-After``), which the OTLP exporters honour. gzip is grpcio's.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ...records.spans import PlainSpan
from . import protocol as otlp
from .events import PlainLog
from .logs_protocol import logs_of

__all__ = ["GrpcEndpoint", "PortTaken", "RETRY_AFTER_SECONDS"]

log = logging.getLogger("looptrace.ingest")

RETRY_AFTER_SECONDS = 1
_RETRY_INFO = RetryInfo(retry_delay=Duration(seconds=RETRY_AFTER_SECONDS)).SerializeToString()
WORKERS = 16  # concurrent Export calls; more wait in grpcio's queue (their spans are not held meanwhile)


class PortTaken(OSError):
    """The gRPC port could not be bound."""


def _free_or_raise(host: str, port: int, target: str) -> None:
    """Bind the port once before grpcio does: grpcio's C core writes its own log line to stderr
    (``E... add_port.cc:83] Failed to add port to server ...``) before it reports a taken port, and
    ``looptrace collect`` says so in its own words. Port 0 is always free."""
    if port == 0:
        return
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as exc:
        raise PortTaken(f"cannot listen for OTLP/gRPC on {target}: {exc.strerror or exc}") from None


def _answer(context: grpc.ServicerContext, take: Callable[[], bool], refused: Callable[[], None],
            last_error: Callable[[], str | None], what: str) -> None:
    """Take one Export's content, or abort the call with the status the client should act on: a
    request that cannot be decoded is INVALID_ARGUMENT (not retried), a bug INTERNAL, and content that
    could not be kept UNAVAILABLE with a retry delay. Spans and log records are answered alike."""
    try:
        accepted = take()
    except otlp.IngestError as exc:
        refused()
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug here is reported to the client, and the server goes on
        log.exception("looptrace collect: gRPC %s request failed", what)
        refused()
        context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
    if not accepted:
        refused()
        context.set_trailing_metadata((("google.rpc.retryinfo-bin", _RETRY_INFO),))
        context.abort(grpc.StatusCode.UNAVAILABLE, f"could not keep the {what}: {last_error()}")


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, ingest: Callable[[Sequence[PlainSpan]], bool], refused: Callable[[], None],
                 last_error: Callable[[], str | None]) -> None:
        self._ingest, self._refused, self._last_error = ingest, refused, last_error

    def Export(self, request: ExportTraceServiceRequest,  # noqa: N802 - the proto's name
               context: grpc.ServicerContext) -> ExportTraceServiceResponse:
        _answer(context, lambda: self._ingest(otlp.spans_of(request)), self._refused, self._last_error, "spans")
        return ExportTraceServiceResponse()


class _LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    """The same answers as ``_TraceService``, for log records (``OtlpReceiver.ingest_logs``)."""

    def __init__(self, ingest: Callable[[Sequence[PlainLog]], bool], refused: Callable[[], None],
                 last_error: Callable[[], str | None]) -> None:
        self._ingest, self._refused, self._last_error = ingest, refused, last_error

    def Export(self, request: ExportLogsServiceRequest,  # noqa: N802 - the proto's name
               context: grpc.ServicerContext) -> ExportLogsServiceResponse:
        _answer(context, lambda: self._ingest(logs_of(request)), self._refused, self._last_error, "log records")
        return ExportLogsServiceResponse()


class GrpcEndpoint:
    """A grpcio server on ``host:port`` (0 picks a free port) serving OTLP's trace service."""

    def __init__(self, ingest: Callable[[Sequence[PlainSpan]], bool], refused: Callable[[], None],
                 last_error: Callable[[], str | None], *, host: str, port: int, max_body: int,
                 ingest_logs: Callable[[Sequence[PlainLog]], bool] | None = None) -> None:
        self._server = grpc.server(ThreadPoolExecutor(WORKERS, thread_name_prefix="looptrace-otlp-grpc"),
                                   options=[("grpc.max_receive_message_length", max_body),
                                            ("grpc.so_reuseport", 0)])
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            _TraceService(ingest, refused, last_error), self._server)
        if ingest_logs is not None:
            logs_service_pb2_grpc.add_LogsServiceServicer_to_server(
                _LogsService(ingest_logs, refused, last_error), self._server)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        _free_or_raise(host, port, target)
        try:
            self.port = self._server.add_insecure_port(target)
        except RuntimeError as exc:  # grpcio says "Failed to bind" this way
            raise PortTaken(f"cannot listen for OTLP/gRPC on {target}: {exc}") from None
        if not self.port:
            raise PortTaken(f"cannot listen for OTLP/gRPC on {target}")
        self.host = host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self, grace: float = 5.0) -> None:
        """Refuse new calls, let those under way finish (up to ``grace`` seconds)."""
        self._server.stop(grace).wait()
