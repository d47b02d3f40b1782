"""Running one user query in a child process with a memory ceiling and a deadline that is enforced.

The child (``child.py``; forked from a single-threaded caller such as ``looptrace sql``, else a
fresh interpreter) opens the session, says it is ready, and runs the query under ``RLIMIT_AS``
and DuckDB's ``memory_limit``. Here the parent gives it ``timeout`` seconds from ready (plus
``KILL_GRACE`` for DuckDB's own interrupt to answer first) and kills it past that: a single scalar
that never reaches an interrupt check cannot outlive its limit. The caller's process never holds the
query's memory, so the viewer stays alive when a query is stopped; the store is only ever read.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING

from .child import READY, Request, run
from .result import QueryError, QueryResult

if TYPE_CHECKING:
    from ..export.source import ParquetSource
    from ..store import Store

__all__ = ["run_supervised", "check_limit", "KILL_GRACE", "OPEN_WAIT"]

KILL_GRACE = 1.0  # seconds past the time limit before the child is killed (DuckDB's interrupt goes first)
OPEN_WAIT = 120.0  # seconds to start the child and open the session (it may wait for a busy store)


def check_limit(name: str, value: float) -> float:
    """``value`` if it is a positive finite number, else a QueryError: 0, a negative or NaN limit
    would leave the query unbounded."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise QueryError(f"{name} must be a positive number, not {value!r}")
    return float(value)


def _timeout_message(timeout: float) -> str:
    return f"query stopped: over the {timeout:g} s time limit; add a LIMIT or a WHERE"


def _read_until(fd: int, buf: bytearray, deadline: float, want: int | None) -> bool:
    """Read from ``fd`` into ``buf`` until it holds ``want`` bytes (None: until EOF) or ``deadline``
    passes; True if reached. EOFError if the pipe ends before ``want`` bytes."""
    while want is None or len(buf) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return False
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            if want is None:
                return True
            raise EOFError  # the child ended before saying anything
        buf += chunk
    return True


def run_supervised(
    source: Store | ParquetSource | str, sql: str, *, limit: int | None, timeout: float, memory_gb: float,
) -> QueryResult:
    timeout = check_limit("the time limit", timeout)
    memory_bytes = int(check_limit("the memory limit", memory_gb) * 2**30)
    # Spill files go to a private folder removed here, even when the child is killed mid-spill.
    with tempfile.TemporaryDirectory(prefix="looptrace-sql-") as scratch:
        request = Request(source, sql, limit, timeout, memory_bytes, scratch)
        return _supervise(_start(request), timeout, memory_bytes)


def _start(request: Request) -> _Spawned | _Forked:
    if _may_fork():
        try:
            return _Forked(request)
        except OSError:  # no process to spare for a fork (EAGAIN, ENOMEM): the spawn may still get one
            pass
    return _Spawned(request)


def _may_fork() -> bool:
    """Whether the query's process can be forked from this one: a new interpreter costs a second
    start-up (and importing looptrace again: ~0.2 s of every ``looptrace sql``), a fork nothing. Only
    from a single thread: a lock another thread holds at the fork stays held in the child (the
    viewer, and any program with threads, start a fresh interpreter instead)."""
    return hasattr(os, "fork") and threading.active_count() == 1 and _one_native_thread() \
        and "duckdb" not in sys.modules  # DuckDB's own threads and state: a query needs none of the caller's


def _one_native_thread() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1  # threads Python does not know of, too
    except OSError:
        return True  # no /proc (macOS): Python's count and the DuckDB test stand


class _Spawned:
    """The query's process as a fresh interpreter (``python -m looptrace.tracer.query.child``)."""

    def __init__(self, request: Request) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "looptrace.tracer.query.child"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
            start_new_session=True,  # a Ctrl-C at the terminal reaches the caller, which kills the child
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self.fd = self._proc.stdout.fileno()
        try:
            self._proc.stdin.write(pickle.dumps(request))
            self._proc.stdin.close()
        except BrokenPipeError:
            pass  # it died at once: the answer is missing, which ``_supervise`` reports

    def wait(self) -> int:
        return self._proc.wait()

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        assert self._proc.stdout is not None
        self._proc.stdout.close()


class _Forked:
    """The query's process forked from this one, after its imports: it serves the request and exits
    without returning into the caller's code (no atexit handlers, no buffers flushed twice)."""

    def __init__(self, request: Request) -> None:
        read, write = os.pipe()
        try:
            self._pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            raise
        if self._pid == 0:  # the child
            code = 1
            try:
                os.close(read)
                os.setsid()  # as start_new_session: a Ctrl-C reaches the caller, which kills the child
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 0)
                os.dup2(devnull, 2)
                run(request, write)
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        self.fd = read
        self._status: int | None = None

    def wait(self) -> int:
        if self._status is None:
            self._status = os.waitstatus_to_exitcode(os.waitpid(self._pid, 0)[1])
        return self._status

    def stop(self) -> None:
        if self._status is None:
            try:
                os.kill(self._pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.wait()
        os.close(self.fd)


def _supervise(child: _Spawned | _Forked, timeout: float, memory_bytes: int) -> QueryResult:
    try:
        buf = bytearray()
        if not _read_until(child.fd, buf, time.monotonic() + OPEN_WAIT, 1):
            raise QueryError(f"query stopped: the store could not be opened within {OPEN_WAIT:g} s")
        if buf[:1] == READY:
            del buf[:1]
            if not _read_until(child.fd, buf, time.monotonic() + timeout + KILL_GRACE, None):
                raise QueryError(_timeout_message(timeout))
        elif not _read_until(child.fd, buf, time.monotonic() + OPEN_WAIT, None):  # an error before ready
            raise QueryError(f"query stopped: the store could not be opened within {OPEN_WAIT:g} s")
        returncode = child.wait()
        try:
            kind, payload = pickle.loads(bytes(buf))
        except Exception:  # noqa: BLE001 - a child killed by the ceiling leaves a torn or no answer
            raise QueryError(_died(returncode, memory_bytes)) from None
    except EOFError:
        raise QueryError(_died(child.wait(), memory_bytes)) from None
    finally:
        child.stop()
    if kind == "ok":
        result: QueryResult = payload
        return result
    raise QueryError(str(payload))


def _died(returncode: int | None, memory_bytes: int) -> str:
    how = f"signal {signal.Signals(-returncode).name}" if returncode and returncode < 0 else f"exit {returncode}"
    return (f"query stopped: its process ended without an answer ({how}), most likely over the "
            f"{memory_bytes / 2**30:g} GB memory limit")
