"""What ``looptrace collect`` acknowledged survives ``kill -9`` (issue 24).

A real ``collect`` process is killed with SIGKILL again and again, and started again, while four agents
export runs through the real OTLP exporters (two over HTTP, two over gRPC), with their own retries.
Each agent notes the spans its exporter reported delivered. At the end every acknowledged span is
stored exactly once and the runs come out whole, as without the crashes. Before the journal, a killed
receiver lost every open trace it had answered 200 for (0 of 8 spans stored).

Half the kills land at a random moment once traffic flows; the other half land *at an answer*: the
agents reach collect through a relay (tests/relay.py) that holds collect's next answer, kills collect,
then passes the answer on, alternately over HTTP and gRPC. The agent then holds an acknowledgement from
a dead receiver, so a receiver that answers before its journal write is durable loses spans every
time (issue 39: with random kills alone that window, a few milliseconds, was hit only by luck). The
relay also keeps the agents' endpoint fixed while each collect takes the ports the kernel gives it.
The agents also send each model call's messages as a GenAI log record (issue 37) through the SDK's
real OTLP log exporters: every acknowledged record is stored once, joined to its span or kept as late.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.protocol import spans_of
from looptrace.tracer.store.segments import list_segments, segments_dir

from .conftest import PYTHON, ROOT, python_env, query
from .relay import Relay
from .test_ingest import genai_agent, request_of

# The senders keep sending (a run of 6 steps takes 4.5 s of pauses) until the kills are done, then end the
# runs under way: the test lasts as long as its kills take, whatever the load (a kill cycle is a collect's
# start, the exporters' backoff, then traffic again). A fixed 6 runs a sender (27 s of pauses; 4, 18 s, let
# one of 5 runs at load ~14 get only 2 kills in) kept a quiet machine waiting ~14 s after the 6th kill.
# TRACES only bounds a sender that is never told to stop.
TRACES, STEPS, PAUSE = 40, 6, 0.75
SENDERS = [("http", "h1"), ("http", "h2"), ("grpc", "g1"), ("grpc", "g2")]
KILLS = 6


def _collect(db: Path, http: Relay, grpc: Relay) -> tuple[subprocess.Popen[str], int]:
    """A started collect on ports of its own, joined to the relays, and how many spans of open traces it
    took back from the journal (it says so before it says where it listens)."""
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                             "--grpc-port", "0", "--settle", "0.5", "--diagnose-every", "0"],
                            cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    taken_back = 0
    while "listening on" not in (line := proc.stdout.readline()):
        assert line, proc.stderr.read() if proc.stderr else ""
        if "taken back" in line:
            taken_back += int(line.split("collect: ", 1)[1].split()[0].replace(",", ""))
    assert "(gRPC)" in line, line
    http.upstream, grpc.upstream = (int(p) for p in re.findall(r"http://127\.0\.0\.1:(\d+)", line))
    return proc, taken_back


def _until_it_writes(db: Path, senders: list[subprocess.Popen[str]], timeout: float = 60) -> None:
    """Until the started collect has written a segment (a request got through and was journaled), or
    the senders are done. On a loaded machine a collect takes seconds to start and the exporters back
    off for seconds after each kill: a kill 1 to 3 s after start then often came before any request,
    found nothing open, and the run proved nothing. Waiting for traffic keeps every kill mid-export."""
    folder = segments_dir(db)
    before = set(list_segments(folder))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(s.poll() is None for s in senders):
        if set(list_segments(folder)) - before:
            return
        time.sleep(0.05)


def _kill_at_an_answer(relay: Relay, collect: subprocess.Popen[str], senders: list[subprocess.Popen[str]]) -> bool:
    """Kill ``collect`` as its next answer over ``relay`` goes out; False when none came (the senders
    finished), and then it is killed anyway."""
    fired = relay.arm(lambda: (collect.kill(), collect.wait(timeout=30)))
    deadline = time.monotonic() + 60
    while not fired.wait(0.05) and time.monotonic() < deadline and any(s.poll() is None for s in senders):
        pass
    relay.disarm()
    if not fired.is_set():
        collect.kill()
    return fired.is_set()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_kill_9_at_random_moments_and_at_answers_loses_no_acknowledged_span(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    db = tmp_path / "store.duckdb"
    with Relay() as http, Relay(http2=True) as grpc:
        collect, _ = _collect(db, http, grpc)
        endpoints = {"http": f"http://127.0.0.1:{http.port}/v1/traces", "grpc": f"http://127.0.0.1:{grpc.port}"}
        senders = [subprocess.Popen([PYTHON, "-m", "tests.acked_sender", protocol, endpoints[protocol], tag,
                                     str(TRACES), str(STEPS), str(PAUSE), "logs"], cwd=ROOT, env=python_env(),
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                   for protocol, tag in SENDERS]
        kills = taken_back = 0
        at_answers: list[str] = []
        try:
            while kills < KILLS and any(s.poll() is None for s in senders):
                _until_it_writes(db, senders)
                if kills % 2 == 0:  # at an answer, HTTP and gRPC in turn
                    relay = http if kills % 4 == 0 else grpc
                    if _kill_at_an_answer(relay, collect, senders):
                        at_answers.append("http" if relay is http else "grpc")
                else:
                    time.sleep(rng.uniform(0.0, 1.0))  # a random moment once exports flow again
                    collect.kill()  # SIGKILL: no handler, no flush
                collect.wait(timeout=30)
                http.upstream = grpc.upstream = None  # connections refused until the next collect is up
                kills += 1
                collect, spans = _collect(db, http, grpc)
                taken_back += spans
            for s in senders:  # the kills are done: each ends the run under way and starts no other
                assert s.stdin is not None
                try:
                    s.stdin.write("stop\n")
                    s.stdin.flush()
                except BrokenPipeError:  # it already ended (its returncode is checked below)
                    pass
            outputs = [s.communicate(timeout=240) for s in senders]
        finally:
            for s in senders:
                if s.poll() is None:
                    s.kill()
            collect.send_signal(signal.SIGINT)
            out, err = collect.communicate(timeout=60)
    acked: list[str] = []
    acked_logs = n = 0
    for (protocol, tag), (stdout, stderr), s in zip(SENDERS, outputs, senders):
        assert s.returncode == 0, stderr[-2000:]
        lines = stdout.split("\n")
        [sent] = [int(line.split()[1]) for line in lines if line.startswith("traces ")]
        assert sent >= 1, (tag, "sent no run")
        n += sent
        assert "failed 0" in lines, (tag, [x for x in lines if x.startswith("failed")],
                                     [x for x in stderr.split("\n") if "Transient" not in x][-20:])  # the exporters' retries got every batch in
        acked += [line.split()[1] for line in lines if line.startswith("acked ")]
        assert "failed_logs 0" in lines, (tag, [x for x in lines if x.startswith("failed_logs")])
        acked_logs += sum(int(line.split()[1]) for line in lines if line.startswith("acked_logs "))
    spans_per_trace = 1 + 2 * STEPS
    assert kills >= 3, f"the senders finished before {KILLS} kills: make them slower"
    assert {"http", "grpc"} <= set(at_answers), f"kills at an answer: {at_answers}; the senders finished first"
    assert taken_back > 0, "no kill found an open trace: the test proved nothing"
    assert len(acked) == n * spans_per_trace == len(set(acked))
    stored = dict(query(db, "SELECT span_id, count(*) FROM spans GROUP BY span_id"))
    lost = {s: stored.get(s) for s in acked if stored.get(s) != 1}
    assert lost == {}, f"{len(lost)} acknowledged spans not stored once (kills at answers: {at_answers})"
    assert len(stored) == n * spans_per_trace
    assert query(db, "SELECT count(*), count(DISTINCT agent), count(*) FILTER (status = 'ok'), "
                     "count(*) FILTER (n_steps = ?) FROM runs", [STEPS]) == [(n, n, n, n)]
    assert query(db, "SELECT count(*), count(DISTINCT (run_id, step)) FROM steps") == [(n * STEPS, n * STEPS)]
    # The journal's open spans are all closed now: a later collect has nothing to take back.
    assert query(db, "SELECT count(*) FROM received_spans ANTI JOIN spans USING (trace_id, span_id)") == [(0,)]
    # Every acknowledged log record once: joined to its model call (its text is that call's response), or,
    # when the exporters' backoff after a kill held it past --settle while its spans got through and the
    # trace was written, kept under its run as 'late'. Never dropped, never stored twice.
    assert acked_logs == n * STEPS
    statuses = dict(query(db, "SELECT status, count(*) FROM log_records GROUP BY ALL"))
    assert set(statuses) <= {"joined", "late"}, statuses
    assert query(db, "SELECT count(*), count(DISTINCT log_id), count(run_id) FROM log_records") == \
        [(n * STEPS, n * STEPS, n * STEPS)], statuses
    assert query(db, "SELECT count(*) FROM llm_call_records WHERE CAST(response AS VARCHAR) LIKE '%thinks%'") == [(statuses.get("joined", 0),)]
    assert query(db, "SELECT count(*) FROM received_logs ANTI JOIN log_records USING (log_id)") == [(0,)]
    print(f"seed {seed}: {kills} kills ({len(at_answers)} at an answer: {at_answers}), {taken_back} open spans "
          f"taken back, {len(acked)} spans acknowledged and stored once, {acked_logs} log records ({statuses}); "
          f"last collect: {out.strip()}")


def _full_pipe() -> tuple[int, int]:
    """A pipe whose buffer is already full: a process writing to it blocks until the other end reads."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        while True:
            os.write(write, b"\n" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(write, True)
    return read, write


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_collect_starts_still_finishes_the_traces_it_took_back(
        tmp_path: Path, sig: signal.Signals) -> None:
    """The cause of the kill test's rare failure (4 traces, 52 spans left open by the last collect): a
    signal between ``start()``, which takes the open traces back, and the ``try`` that stops the
    receiver ended the process there (a KeyboardInterrupt, or SIGTERM's default action) with the traces
    only in memory. The window is held open here: collect's stdout is a full pipe, so its first line
    blocks it right after ``start()``; the signal comes while it waits."""
    db = tmp_path / "store.duckdb"
    crashed = OtlpReceiver(db, port=None, settle=60)  # journals, writes nothing, never stops: a kill -9
    for _ in range(2):
        assert crashed.ingest(spans_of(request_of(lambda t: genai_agent(t, repeats=2))))
    read, write = _full_pipe()
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                             "--grpc-port", "0", "--settle", "0.5", "--diagnose-every", "0"],
                            cwd=ROOT, env=python_env(), stdout=write, stderr=subprocess.PIPE, text=True)
    os.close(write)
    assert proc.stderr is not None
    while "taken back" not in (line := proc.stderr.readline()):  # logged by start(), before the first print
        assert line, proc.wait(30)
    time.sleep(0.5)  # now blocked writing its first line, with the traces in memory only
    proc.send_signal(sig)
    with os.fdopen(read) as out:
        printed = out.read()  # unblocks it; read to the end (the process exits)
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert "listening on" in printed and "12 spans written in 2 traces" in printed, printed.strip()[-500:]
    assert query(db, "SELECT count(*) FROM open_spans") == [(0,)]
    assert query(db, "SELECT count(*), count(*) FILTER (status = 'ok') FROM runs") == [(2, 2)]
