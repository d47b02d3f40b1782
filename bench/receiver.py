"""Spans per second through ``looptrace collect``, sent by the real OTLP/HTTP exporter from another process.

Three processes, as in use: ``looptrace collect --settle 0`` on a free port, ``tests/otlp_sender.py``
(the SDK's ``BatchSpanProcessor`` and ``OTLPSpanExporter``, GenAI-convention traces of 125 spans), and
this one, which starts the clock as it starts the sender and stops it when every span is queryable in
``spans``. With ``--settle 0`` a trace is written before the request carrying its root is answered, so
once the sender's ``force_flush`` has returned nothing is left in flight: the store is polled after the
sender exits, and the first reader session also absorbs the receiver's segments into the file, which
is part of what "queryable" costs.

The baseline is the same sender against a receiver that does nothing (this module run as a script: a
``ThreadingHTTPServer`` reading each body and answering 200 with an empty one), timed until the sender
exits: what the exporter, HTTP and process start-up cost before looptrace does any work.

The cost of durability (issue 24): ``collect`` writes every request's spans to its journal, fsynced,
before it answers. Beside it, in the same alternating rounds, runs the receiver it replaces: the same
``OtlpReceiver`` with the journal off (``python -m bench.receiver memory DB``), which answered from
memory; over OTLP/HTTP and over OTLP/gRPC (the real gRPC exporter), as a ratio durable / in-memory.
"""

from __future__ import annotations

import os
import re
import threading
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from looptrace.tracer.store import Store

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "receiver: spans/s from the OTLP exporter in another process into `looptrace collect`"
GOAL_RATE = 5_000.0
ROUNDS = 3
STEPS = 62  # 1 + 2 * 62 = 125 spans a trace
SPANS_PER_TRACE = 1 + 2 * STEPS
_ROOT = Path(__file__).resolve().parent.parent
_TIMEOUT = 300.0
_SENT = re.compile(r"sent (\d+) spans in ([\d.]+) s")
_GRPC_URL = re.compile(r"(http://\S+) \(gRPC\)")
DURABLE_GOAL = 0.5  # durable / in-memory spans/s: durability may cost at most half (set before measuring)
_EMPTY_200 = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"


class _NullHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and no Nagle, as the real receiver does
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.wfile.write(_EMPTY_200)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _serve_null() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NullHandler)
    server.daemon_threads = True
    print(f"null receiver: listening on http://127.0.0.1:{server.server_port}/v1/traces", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # how the benchmark stops it
        pass
    finally:
        server.server_close()


def _serve_memory(db: str, settle: float) -> None:
    """The receiver as it was before the journal: it answered from memory, durable only once a trace
    was written. HTTP and gRPC on free ports, until SIGINT."""
    from looptrace.tracer.ingest.otlp import OtlpReceiver

    receiver = OtlpReceiver(db, port=0, grpc_port=0, settle=settle, journal=False).start()
    print(f"memory receiver: listening on {receiver.url}, {receiver.grpc_url} (gRPC)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        receiver.stop()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_ROOT), env.get("PYTHONPATH")]))
    return env


@dataclass
class _Server:
    proc: subprocess.Popen[str]
    url: str
    stderr: IO[str]
    grpc_url: str = ""

    def stop(self) -> None:
        """SIGINT: ``collect`` writes what it holds and compacts, as on Ctrl-C; killed if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        self.stderr.close()


def _start(args: list[str], log: Path) -> _Server:
    stderr = log.open("w+", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, *args], cwd=_ROOT, env=_env(), text=True,
                            stdout=subprocess.PIPE, stderr=stderr)
    server = _Server(proc, "", stderr)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if "listening on " not in line:
        server.stop()
        error = log.read_text(encoding="utf-8")[-2000:]
        raise RuntimeError(f"{' '.join(args)} did not start: {line!r} {error}")
    server.url = line.split("listening on ", 1)[1].split(",", 1)[0].strip()
    grpc = _GRPC_URL.search(line)
    server.grpc_url = grpc.group(1) if grpc else ""
    return server


def _send(url: str, tag: str, traces: int, protocol: str = "http") -> float:
    """Run the sender to completion; its own figure (first span to flushed) in seconds."""
    extra = ["grpc"] if protocol == "grpc" else []
    done = subprocess.run([sys.executable, "-m", "tests.otlp_sender", url, tag, str(traces), str(STEPS), *extra],
                          cwd=_ROOT, env=_env(), capture_output=True, text=True, timeout=_TIMEOUT)
    found = _SENT.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(
            f"the sender failed ({done.returncode}): {done.stdout[-500:]} {done.stderr[-2000:]}")
    return float(found.group(2))


def _stored(db: Path) -> tuple[int, int]:
    if not db.exists() and not Store(db).segments_dir.exists():
        return 0, 0
    with Store(db).reader() as conn:
        row = conn.execute("SELECT count(*), count(DISTINCT span_id) FROM spans").fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


@dataclass(frozen=True)
class _Round:
    seconds: float  # sender start until the last span is queryable (or, for the baseline, sender exit)
    sender_seconds: float  # as the sender reports it: first span until flushed
    stored: int = 0
    distinct: int = 0


def _looptrace(tmp: Path, n: int, traces: int, protocol: str = "http", durable: bool = True,
               settle: float = 0.0) -> _Round:
    db = tmp / f"collect-{n}.duckdb"
    args = (["-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0", "--grpc-port", "0",
             "--settle", str(settle), "--diagnose-every", "0"] if durable else
            ["-m", "bench.receiver", "memory", str(db), str(settle)])
    server = _start(args, tmp / f"collect-{n}.log")
    try:
        started = time.perf_counter()
        sender_seconds = _send(server.grpc_url if protocol == "grpc" else server.url, f"r{n}", traces, protocol)
        deadline = time.monotonic() + _TIMEOUT
        stored, distinct = _stored(db)
        while stored < traces * SPANS_PER_TRACE and time.monotonic() < deadline:
            time.sleep(0.05)
            stored, distinct = _stored(db)
        seconds = time.perf_counter() - started
    finally:
        server.stop()
    return _Round(seconds, sender_seconds, stored, distinct)


def _baseline(tmp: Path, n: int, traces: int) -> _Round:
    server = _start(["-m", "bench.receiver"], tmp / f"null-{n}.log")
    try:
        started = time.perf_counter()
        sender_seconds = _send(server.url, f"b{n}", traces)
        seconds = time.perf_counter() - started
    finally:
        server.stop()
    return _Round(seconds, sender_seconds)


def _durability(tmp: Path, counter: Any, traces: int, protocol: str) -> Result:
    """Durable collect against the in-memory receiver it replaces, same protocol, alternating rounds."""
    sent = traces * SPANS_PER_TRACE
    # The default settle (2 s): a request that does not complete its trace is journaled before the
    # answer, which is the cost measured (with settle 0 a trace is written before its last answer).
    durable, memory = alternate(ROUNDS, lambda: _looptrace(tmp, next(counter), traces, protocol, True, 2.0),
                                lambda: _looptrace(tmp, next(counter), traces, protocol, False, 2.0))
    rate, rate_memory = (sent / median([r.seconds for r in rounds]) for rounds in (durable, memory))
    complete = all(r.stored == r.distinct == sent for r in [*durable, *memory])
    note = (f"OTLP/{protocol.upper() if protocol == 'http' else 'gRPC'}, settle 2 s, {sent:,} spans x {ROUNDS} alternating "
            f"rounds, medians; wall s: durable {', '.join(f'{r.seconds:.2f}' for r in durable)}, in-memory "
            f"{', '.join(f'{r.seconds:.2f}' for r in memory)}; stored/sent: "
            f"{', '.join(f'{r.distinct:,}' for r in [*durable, *memory])} of {sent:,}")
    return Result(f"collect durable vs in-memory receiver, {protocol}", "spans/s", rate, rate_memory,
                  f"ratio >= {DURABLE_GOAL:g}, 0 lost", complete and rate >= DURABLE_GOAL * rate_memory, note)


def run(quick: bool = False) -> list[Result]:
    traces = 32 if quick else 160
    sent = traces * SPANS_PER_TRACE
    counter = iter(range(1_000))
    with scratch_dir("receiver") as tmp:
        ours, theirs = alternate(ROUNDS, lambda: _looptrace(tmp, next(counter), traces),
                                 lambda: _baseline(tmp, next(counter), traces))
        durability = [_durability(tmp, counter, traces, protocol) for protocol in ("http", "grpc")]
    rate = sent / median([r.seconds for r in ours])
    rate_null = sent / median([r.seconds for r in theirs])
    complete = all(r.stored == r.distinct == sent for r in ours)
    note = (
        f"{sent:,} spans ({traces} traces of {SPANS_PER_TRACE}) x {ROUNDS} alternating rounds, medians; "
        f"stored/sent per round: {', '.join(f'{r.distinct:,}/{sent:,}' for r in ours)}; "
        f"wall s: looptrace {', '.join(f'{r.seconds:.2f}' for r in ours)}, "
        f"null {', '.join(f'{r.seconds:.2f}' for r in theirs)}; "
        "the sender's own first-span-to-flushed s, median: "
        f"looptrace {median([r.sender_seconds for r in ours]):.2f}, "
        f"null {median([r.sender_seconds for r in theirs]):.2f}"
    )
    return [Result("spans accepted, all queryable", "spans/s", rate, rate_null,
                   f"looptrace >= {GOAL_RATE / 1e3:g}k/s, 0 lost", rate >= GOAL_RATE and complete, note),
            *durability]


if __name__ == "__main__":
    if sys.argv[1:2] == ["memory"]:
        _serve_memory(sys.argv[2], float(sys.argv[3]))
    else:
        _serve_null()
