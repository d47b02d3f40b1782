"""Traced agents that meet a fault, run as separate processes by ``tests/test_faults.py``.

usage: python -m tests.fault_agent MODE DB [ARGS...]

  steps DB N PAUSE             a run of N steps inside ``with Tracing(db) as t, t.run(...)``; prints
                               "step K" once step K has ended (a signal test kills it part-way)
  no-shutdown DB N HOW         the same without ``with`` or ``shutdown()``; ends by ``sys.exit(0)``
                               (HOW=exit) or by falling off the end of the script (HOW=fall)
  hold DB SECONDS              holds the DuckDB file open for writing, as a DuckDB shell would, for
                               SECONDS or until its stdin is closed
  fork DB N EXIT               a parent run, and a forked child that traces its own run of N steps.
                               EXIT=_exit: forked inside the parent's run, the child leaves by
                               ``os._exit`` after its work, as multiprocessing does; EXIT=sys.exit:
                               forked inside the parent's run, the child calls ``sys.exit(0)``, which
                               unwinds the parent's ``with`` blocks it inherited; EXIT=return: forked
                               after the parent's run, the child leaves by a normal interpreter exit
  fill DB EARLY LATE BYTES LIMIT [FILLER]
                               EARLY small steps, flushed; then (if LIMIT > 0) a file-size limit of
                               LIMIT bytes with SIGXFSZ ignored, and (FILLER=keep:PATH or free:PATH)
                               PATH written until the disk is full; then LATE steps whose observations
                               are BYTES of incompressible text. With free:PATH the filler is removed
                               before tracing shuts down. Prints "agent finished" at the very end.
  wal DB ROWS                  opens DB with DuckDB, commits ROWS inserts one by one (no checkpoint),
                               prints "inserted", then waits to be killed, so a WAL stays behind

Each mode prints what it reached on stdout, flushed, so a test can time its fault.
"""

from __future__ import annotations

import base64
import os
import resource
import select
import signal
import sys
import time

from looptrace.tracer import Tracing
from looptrace.tracer.spans.manual import Run


def _step(run: Run, i: int, observation: str = "") -> None:
    with run.step(f"thought {i}") as step, step.tool_call("echo", {"i": i}, call_id=f"call-{i}") as call:
        call.result(observation or f"observation {i}")


def steps(db: str, n: int, pause: float) -> None:
    with (Tracing(db, schedule_delay_millis=100) as t,
          t.run("fault-agent", task="count", model="scripted") as run):
        print("started", run.run_id, flush=True)
        for i in range(1, n + 1):
            _step(run, i)
            print("step", i, flush=True)
            time.sleep(pause)
    print("done", flush=True)


def no_shutdown(db: str, n: int, how: str) -> None:
    t = Tracing(db, schedule_delay_millis=60_000)  # no timed flush: only the exit handler can save the spans
    with t.run("no-shutdown", task="exit early", model="scripted") as run:
        for i in range(1, n + 1):
            _step(run, i)
    print("done", flush=True)
    if how == "exit":
        sys.exit(0)


def hold(db: str, seconds: float) -> None:
    import duckdb

    conn = duckdb.connect(db)
    print("held", flush=True)
    select.select([sys.stdin], [], [], seconds)  # until SECONDS pass or the test closes our stdin
    conn.close()


def _child_work(t: Tracing, n: int) -> None:
    with t.run("child", task="in a forked child", model="scripted") as run:
        for i in range(1, n + 1):
            _step(run, i)


def fork(db: str, n: int, exit_how: str) -> None:
    t = Tracing(db, schedule_delay_millis=100)
    if exit_how == "return":
        with t.run("parent", task="before fork", model="scripted") as run:
            _step(run, 1)
        t.flush()
        pid = os.fork()
        if pid == 0:
            _child_work(t, n)
            print("child done", flush=True)
            return
    else:
        with t.run("parent", task="forks a worker", model="scripted") as run:
            _step(run, 1)
            pid = os.fork()
            if pid == 0:
                try:
                    _child_work(t, n)
                    print("child done", flush=True)
                finally:
                    if exit_how == "_exit":
                        os._exit(0)  # as multiprocessing's fork start method does
                sys.exit(0)
            _step(run, 2)
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status), flush=True)
    t.shutdown()
    print("parent done", flush=True)


def _fill_disk(path: str) -> None:
    """Write ``path`` until the file system is full, in ever smaller pieces, so not a byte is left."""
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass


def fill(db: str, early: int, late: int, size: int, limit: int, filler: str = "-") -> None:
    with (Tracing(db, schedule_delay_millis=50) as t,
          t.run("filler", task="fill the disk", model="scripted") as run):
        for i in range(1, early + 1):
            _step(run, i)
        t.flush()
        print("flushed", early, flush=True)
        if limit > 0:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        how, _, path = filler.partition(":")
        if path:
            _fill_disk(path)
        for i in range(early + 1, early + late + 1):
            _step(run, i, base64.b64encode(os.urandom(size * 3 // 4)).decode())
        if how == "free":
            t.flush()
            os.remove(path)
    print("agent finished", flush=True)


def wal(db: str, rows: int) -> None:
    import duckdb

    conn = duckdb.connect(db)
    conn.execute("CREATE TABLE IF NOT EXISTS wal_probe (i INTEGER, note VARCHAR)")
    conn.execute("CHECKPOINT")
    for i in range(rows):
        conn.execute("INSERT INTO wal_probe VALUES (?, ?)", [i, "committed, not checkpointed"])
    print("inserted", flush=True)
    time.sleep(600)


def main(argv: list[str]) -> None:
    mode, db, *rest = argv
    if mode == "steps":
        steps(db, int(rest[0]), float(rest[1]))
    elif mode == "no-shutdown":
        no_shutdown(db, int(rest[0]), rest[1])
    elif mode == "hold":
        hold(db, float(rest[0]))
    elif mode == "fork":
        fork(db, int(rest[0]), rest[1])
    elif mode == "fill":
        fill(db, int(rest[0]), int(rest[1]), int(rest[2]), int(rest[3]), *rest[4:])
    elif mode == "wal":
        wal(db, int(rest[0]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
