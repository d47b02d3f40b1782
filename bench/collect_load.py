"""What ``looptrace collect`` itself costs: spans/s and CPU per span from a sender too cheap to be the limit.

The ``receiver`` row sends through the SDK's own exporter, which on a 2-core machine is the limit
itself. Here the requests are built before the clock starts: GenAI agent traces (``tests/otlp_sender``'s
shape, 31 spans a trace: an ``invoke_agent`` span over 15 ``chat`` and 15 ``execute_tool`` spans) made by
the real OTel SDK, 8 traces a request, encoded by the real OTLP protobuf encoder. A sender process
(this module, ``send``) replays them over 4 keep-alive HTTP connections from one thread: raw sockets,
each request's bytes prepared in advance, one request in flight per connection, a 503 retried.

Measured per round, from the sender's first byte: the seconds until every span is queryable in
``spans`` (the store polled with ``count(*)`` once the sender has its last answer; the first reader
session absorbs ``collect``'s segments into the file, which is part of what "queryable" costs), the
seconds until the last answer (acknowledged), and collect's CPU over that window from
``/proc/PID/stat`` (user + system, its threads, and children it waited for). The baseline is the same
sender against a null receiver (this module, ``null``: a thread per connection reading each body and
answering 200): the sender's ceiling, and what merely reading the bytes costs in Python.

``collect`` runs as a user starts it, but for free ports, no gRPC and ``--diagnose-every 0`` (the
analyzer is not the receiver), at ``--settle 0`` (a trace whose root has arrived is written before its
request is answered) and at the default ``--settle 2`` (each request journaled, fsynced, then its traces
written in bulk by the flusher two seconds later: a fixed latency added to "queryable").
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .receiver import _env, _start, _stored
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run", "build_requests"]

TITLE = "collect_load: pre-encoded OTLP/HTTP requests into `looptrace collect` (cheap sender, 4 connections)"
GOAL_RATE = 10_000.0  # spans/s until queryable, one collect on 2 cores (issue 38)
GOAL_CPU_US = 100.0  # collect's CPU per span
ROUNDS = 3
TRACES_PER_REQUEST = 8
STEPS = 15  # 1 + 2 * 15 = 31 spans a trace
SPANS_PER_TRACE = 1 + 2 * STEPS
CONNECTIONS = 4
_TIMEOUT = 300.0
_ROOT = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")


def build_requests(requests: int, tag: str = "load") -> list[bytes]:
    """``requests`` ExportTraceServiceRequest bodies of ``TRACES_PER_REQUEST`` traces each, made by the
    real SDK (a TracerProvider, an in-memory exporter) and encoded by the OTLP exporter's own encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.otlp_sender import send_traces

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": f"sender-{tag}"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("otlp_sender")
    bodies = []
    for n in range(requests):
        send_traces(tracer, f"{tag}{n}", TRACES_PER_REQUEST, STEPS)
        bodies.append(encode_spans(memory.get_finished_spans()).SerializeToString())
        memory.clear()
    provider.shutdown()
    return bodies


def _save(bodies: list[bytes], path: Path) -> None:
    with path.open("wb") as f:
        for body in bodies:
            f.write(struct.pack("<I", len(body)))
            f.write(body)


def _load(path: Path) -> list[bytes]:
    data = path.read_bytes()
    out, at = [], 0
    while at < len(data):
        (size,) = struct.unpack_from("<I", data, at)
        out.append(data[at + 4:at + 4 + size])
        at += 4 + size
    return out


# -- the sender (its own process) --------------------------------------------------------------------


def _send(url: str, path: Path) -> None:
    """Wait for a line on stdin, then send every request over CONNECTIONS connections; print the
    seconds from the first byte to the last answer, and the retries (503s)."""
    hostport, _, target = url.removeprefix("http://").partition("/")
    host, port = hostport.rsplit(":", 1)
    heads = f"POST /{target} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/x-protobuf\r\n"
    requests = [f"{heads}Content-Length: {len(b)}\r\n\r\n".encode() + b for b in _load(path)]
    socks = [socket.create_connection((host, int(port))) for _ in range(CONNECTIONS)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("ready", flush=True)
    sys.stdin.readline()
    started = time.perf_counter()
    todo = list(range(len(requests) - 1, -1, -1))  # popped from the end: first request first
    retries = 0
    sel = selectors.DefaultSelector()
    inflight: dict[socket.socket, tuple[int, bytearray]] = {}

    def next_on(s: socket.socket) -> None:
        if todo:
            i = todo.pop()
            s.sendall(requests[i])
            inflight[s] = (i, bytearray())
            sel.register(s, selectors.EVENT_READ)

    for s in socks:
        next_on(s)
    while inflight:
        for key, _ in sel.select():
            s = key.fileobj
            assert isinstance(s, socket.socket)
            i, buf = inflight[s]
            chunk = s.recv(65536)
            if not chunk:
                raise SystemExit("the receiver closed a connection")
            buf += chunk
            head_end = buf.find(b"\r\n\r\n")
            if head_end < 0:
                continue
            head = bytes(buf[:head_end]).decode("latin-1").lower()
            length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0]) if "content-length:" in head else 0
            if len(buf) < head_end + 4 + length:
                continue
            sel.unregister(s)
            del inflight[s]
            status = int(head.split(" ", 2)[1])
            if status == 503:
                retries += 1
                todo.append(i)
                time.sleep(0.01)
            elif status != 200:
                raise SystemExit(f"request {i} answered {status}: {bytes(buf[:300])!r}")
            next_on(s)
    elapsed = time.perf_counter() - started
    print(f"acknowledged {len(requests)} requests in {elapsed:.4f} s, {retries} retries", flush=True)


# -- the null receiver (its own process) -------------------------------------------------------------

_EMPTY_200 = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"


def _null_connection(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    with conn:
        while True:
            head_end = buf.find(b"\r\n\r\n")
            while head_end < 0:
                chunk = conn.recv(1 << 18)
                if not chunk:
                    return
                buf += chunk
                head_end = buf.find(b"\r\n\r\n")
            head = bytes(buf[:head_end]).decode("latin-1").lower()
            length = int(head.split("content-length:", 1)[1].split("\r\n", 1)[0])
            while len(buf) < head_end + 4 + length:
                chunk = conn.recv(1 << 18)
                if not chunk:
                    return
                buf += chunk
            del buf[:head_end + 4 + length]
            conn.sendall(_EMPTY_200)


def _serve_null() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print(f"null receiver: listening on http://127.0.0.1:{listener.getsockname()[1]}/v1/traces", flush=True)
    try:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=_null_connection, args=(conn,), daemon=True).start()
    except KeyboardInterrupt:  # how the benchmark stops it
        pass


# -- the rounds --------------------------------------------------------------------------------------


def _cpu(pid: int) -> float:
    """Seconds of CPU of ``pid`` (user + system, and of the children it waited for)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rfind(")") + 2:].split()
    return sum(int(f) for f in fields[11:15]) / _TICK


@dataclass(frozen=True)
class _Round:
    seconds: float  # first byte sent until every span is queryable (the null receiver: last answer)
    acked: float  # first byte sent until the last answer
    cpu: float  # the receiver's CPU over ``seconds``
    stored: int = 0
    distinct: int = 0
    retries: int = 0


def _round(tmp: Path, n: int, requests: Path, spans: int, settle: float | None) -> _Round:
    db = tmp / f"collect-{n}.duckdb"
    args = (["-m", "bench.collect_load", "null"] if settle is None else
            ["-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0", "--grpc-port", "off",
             "--settle", str(settle), "--diagnose-every", "0"])
    server = _start(args, tmp / f"server-{n}.log")
    sender = None
    try:
        sender = subprocess.Popen([sys.executable, "-m", "bench.collect_load", "send", server.url, str(requests)],
                                  cwd=_ROOT, env=_env(), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert sender.stdin is not None and sender.stdout is not None
        if sender.stdout.readline().strip() != "ready":
            raise RuntimeError("the sender did not start")
        cpu0 = _cpu(server.proc.pid)
        started = time.perf_counter()
        sender.stdin.write("go\n")
        sender.stdin.flush()
        line = sender.stdout.readline()
        acked = time.perf_counter() - started
        if sender.wait(timeout=_TIMEOUT) != 0 or not line.startswith("acknowledged"):
            raise RuntimeError(f"the sender failed: {line!r}")
        retries = int(line.split(", ")[1].split()[0])
        stored = distinct = 0
        if settle is not None:
            deadline = time.monotonic() + _TIMEOUT
            stored, distinct = _stored(db)
            while stored < spans and time.monotonic() < deadline:
                time.sleep(0.05)
                stored, distinct = _stored(db)
        seconds = time.perf_counter() - started
        cpu = _cpu(server.proc.pid) - cpu0
    finally:
        if sender is not None and sender.poll() is None:  # a round that failed: no sender left behind
            sender.kill()
            sender.wait()
        server.stop()
    return _Round(seconds, acked, cpu, stored, distinct, retries)


def _rows(label: str, ours: list[_Round], null: list[_Round], spans: int, settle: float) -> list[Result]:
    rate = spans / median([r.seconds for r in ours])
    rate_null = spans / median([r.seconds for r in null])
    cpu_us = median([r.cpu for r in ours]) / spans * 1e6
    cpu_null_us = median([r.cpu for r in null]) / spans * 1e6
    complete = all(r.stored == r.distinct == spans for r in ours)
    note = (f"{label}: {spans:,} spans ({spans // SPANS_PER_TRACE:,} traces, {TRACES_PER_REQUEST} a request) x "
            f"{len(ours)} alternating rounds, medians; wall s until queryable: "
            f"{', '.join(f'{r.seconds:.2f}' for r in ours)} (acknowledged: {', '.join(f'{r.acked:.2f}' for r in ours)}"
            f", {spans / median([r.acked for r in ours]):,.0f} spans/s); null receiver s: "
            f"{', '.join(f'{r.seconds:.2f}' for r in null)}; collect CPU s: {', '.join(f'{r.cpu:.2f}' for r in ours)}; "
            f"stored/sent: {', '.join(f'{r.distinct:,}' for r in ours)} of {spans:,}; "
            f"503 retries: {sum(r.retries for r in ours)}")
    return [
        Result(f"collect --settle {settle:g}: spans/s until all queryable vs null receiver", "spans/s", rate,
               rate_null, f">= {GOAL_RATE / 1e3:g}k/s, 0 lost", rate >= GOAL_RATE and complete, note),
        Result(f"collect --settle {settle:g}: its CPU per span vs null receiver's", "us/span", cpu_us,
               cpu_null_us, f"<= {GOAL_CPU_US:g} us", cpu_us <= GOAL_CPU_US),
    ]


def run(quick: bool = False) -> list[Result]:
    requests = 60 if quick else 400
    spans = requests * TRACES_PER_REQUEST * SPANS_PER_TRACE
    counter = iter(range(1_000))
    results: list[Result] = []
    with scratch_dir("collect-load") as tmp:
        path = tmp / "requests.bin"
        _save(build_requests(requests), path)
        for settle in (0.0, 2.0):
            ours, null = alternate(ROUNDS, lambda: _round(tmp, next(counter), path, spans, settle),
                                   lambda: _round(tmp, next(counter), path, spans, None))
            results += _rows(f"settle {settle:g}", ours, null, spans, settle)
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["send"]:
        _send(sys.argv[2], Path(sys.argv[3]))
    else:
        _serve_null()
