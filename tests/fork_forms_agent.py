"""The other forking programs of issue 24, for ``test_fork_forms.py``.

usage: python -m tests.fork_forms_agent DB FORM
FORM ``busy``: a thread-heavy parent. ``THREADS`` threads trace runs and flush the store after each
one (so forks land during flushes and segment writes) while the main thread forks: ``FORKS`` bare
``os.fork`` children, each tracing a run and leaving by ``os._exit`` without flushing, and one
``multiprocessing`` fork ``Process``. FORM ``reader-held``: a parent thread holds a store reader while a forked
child shuts its ``Tracing`` down and opens a reader of its own. FORM ``executor-max1:METHOD``: a ``ProcessPoolExecutor`` whose
workers leave after each task (``max_tasks_per_child=1``, so 4 tasks need 4 workers). FORM
``otlp-dead:METHOD``: a dead OTLP endpoint configured (``OTEL_EXPORTER_OTLP_ENDPOINT``, set by the
test), children that leave the normal way (``METHOD`` fork, spawn, forkserver or ``os.fork``); printed
per child: how long it took from the end of its run to its exit.
Prints ``done`` last.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor

from looptrace.tracer import Tracing

from .fork_agent import STEPS

THREADS, FORKS, TASKS = 6, 3, 4
READ_WAIT = 30.0  # seconds the reader-held child's own read may take (it takes about 0.1 s)
_TRACING: Tracing | None = None


def traced_run(name: str) -> str:
    global _TRACING
    if _TRACING is None:  # a spawn or forkserver child
        _TRACING = Tracing(os.environ["FORK_FORMS_DB"])
    with _TRACING.run(f"child-{name}", task=f"task {name}", model="scripted") as run:
        for i in range(STEPS):
            with run.step(f"step {i}") as step, step.tool_call("echo", {"i": i}) as call:
                call.result(f"{name} {i}")
        run.finish("ok", answer=name)
    return name


def _busy_thread(tracing: Tracing, k: int, stop: threading.Event) -> None:
    n = 0
    while not stop.is_set():
        with tracing.run(f"busy-{k}", task=f"busy {k} {n}", model="scripted") as run:
            for i in range(3):
                with run.step(f"step {i}") as step, step.tool_call("echo", {"i": i}) as call:
                    call.result("x" * 2000)
            run.finish("ok", answer="ok")
        tracing.flush()  # a flush in progress on some thread at most moments
        n += 1


def _ended_child(name: str, ended: multiprocessing.queues.SimpleQueue) -> None:
    traced_run(name)
    ended.put(time.monotonic())  # then it leaves the normal way: multiprocessing's exit hooks, atexit (spawn)


def busy(db: str) -> None:
    global _TRACING
    tracing = _TRACING = Tracing(db)
    stop = threading.Event()
    threads = [threading.Thread(target=_busy_thread, args=(tracing, k, stop)) for k in range(THREADS)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    for i in range(FORKS):
        pid = os.fork()
        if pid == 0:
            try:
                traced_run(f"f{i}")
            finally:
                os._exit(0)  # no flush, no exit hooks
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    p = multiprocessing.get_context("fork").Process(target=traced_run, args=("p0",))
    p.start()
    p.join()
    assert p.exitcode == 0
    stop.set()
    for t in threads:
        t.join()


def _count_runs(db: str, seen: list[int]) -> None:
    from looptrace.tracer.store import Store

    with Store(db).reader(absorb=False) as conn:  # absorbing would wait on the parent's open file
        seen.append(conn.execute("SELECT count(*) FROM runs").fetchone()[0])


def reader_held(db: str) -> None:
    """A parent thread holds a store reader (the store's in-process lock) while the main thread forks
    a child that traces a run and shuts its ``Tracing`` down (a compaction: it takes that lock)."""
    from looptrace.tracer.store import Store

    global _TRACING
    tracing = _TRACING = Tracing(db)
    traced_run("parent")
    tracing.flush()
    held, release = threading.Event(), threading.Event()

    def reader() -> None:
        with Store(db).reader():
            held.set()
            release.wait()

    held_by = threading.Thread(target=reader)
    held_by.start()
    held.wait()
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            traced_run("r0")
            tracing.shutdown()
            # Its own reader while the parent's thread still holds one: the path's in-process lock was
            # held at fork by a thread the child does not have, and must not have come along (the
            # path-lock reset at fork). A child's shutdown skips compaction, so without this read the
            # child never takes that lock and the form proves nothing (issue 39). Bounded: a child
            # stuck on the lock says so at once rather than at the test's 90 s.
            seen: list[int] = []
            read = threading.Thread(target=_count_runs, args=(db, seen), daemon=True)
            read.start()
            read.join(READ_WAIT)
            print(f"child read: {seen[0] if seen else 'stuck on the store lock'}", flush=True)
            code = 0 if seen else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    release.set()
    # Joined, not left as a daemon: a daemon thread still closing its DuckDB connection when the
    # interpreter finalizes is ended inside DuckDB's C++ and aborts the process (134, "FATAL: exception
    # not rethrown") after "done" was printed.
    held_by.join()
    assert os.waitstatus_to_exitcode(status) == 0, "the child's reader never opened the store"


def main() -> None:
    db, form = sys.argv[1], sys.argv[2]
    os.environ["FORK_FORMS_DB"] = db
    kind, _, method = form.partition(":")
    if kind == "busy":
        busy(db)
    elif kind == "reader-held":
        reader_held(db)
    elif kind == "executor-max1":
        ctx = multiprocessing.get_context(method)
        with ProcessPoolExecutor(2, mp_context=ctx, max_tasks_per_child=1) as ex:
            assert sorted(ex.map(traced_run, [f"e{i}" for i in range(TASKS)])) == [f"e{i}" for i in range(TASKS)]
    elif kind == "otlp-dead":
        global _TRACING
        if method in ("fork", "os.fork"):
            _TRACING = Tracing(db)  # inherited
        ctx = multiprocessing.get_context("fork" if method == "os.fork" else method)
        ended = ctx.SimpleQueue()
        for i in range(2):
            if method == "os.fork":
                pid = os.fork()
                if pid == 0:
                    traced_run(f"o{i}")
                    ended.put(time.monotonic())
                    sys.exit(0)  # the interpreter's exit: atexit hooks, the SDK's shutdown
                os.waitpid(pid, 0)
            else:
                p = ctx.Process(target=_ended_child, args=(f"o{i}", ended))
                p.start()
                p.join()
                assert p.exitcode == 0
            # CLOCK_MONOTONIC is one clock for every process of the machine
            print(f"exit o{i} {time.monotonic() - ended.get():.2f}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
