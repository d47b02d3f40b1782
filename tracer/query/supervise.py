"""Running one user query in a child process with a memory ceiling and a deadline that is enforced.

The child (``child.py``) opens the session, says it is ready, and runs the query under ``RLIMIT_AS``
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
import time
from typing import TYPE_CHECKING

from .child import READY, Request
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
    passes; True if reached."""
    while want is None or len(buf) < want:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return False
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return want is None
        buf += chunk
    return True


def run_supervised(
    source: Store | ParquetSource | str, sql: str, *, limit: int | None, timeout: float, memory_gb: float,
) -> QueryResult:
    timeout = check_limit("the time limit", timeout)
    memory_bytes = int(check_limit("the memory limit", memory_gb) * 2**30)
    # Spill files go to a private folder removed here, even when the child is killed mid-spill.
    with tempfile.TemporaryDirectory(prefix="looptrace-sql-") as scratch:
        request = pickle.dumps(Request(source, sql, limit, timeout, memory_bytes, scratch))
        return _run_child(request, timeout, memory_bytes)


def _run_child(request: bytes, timeout: float, memory_bytes: int) -> QueryResult:
    proc = subprocess.Popen(
        [sys.executable, "-m", "looptrace.tracer.query.child"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
        start_new_session=True,  # a Ctrl-C at the terminal reaches the caller, which kills the child
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(request)
        proc.stdin.close()
        fd = proc.stdout.fileno()
        buf = bytearray()
        if not _read_until(fd, buf, time.monotonic() + OPEN_WAIT, 1):
            raise QueryError(f"query stopped: the store could not be opened within {OPEN_WAIT:g} s")
        if buf[:1] == READY:
            del buf[:1]
            if not _read_until(fd, buf, time.monotonic() + timeout + KILL_GRACE, None):
                raise QueryError(_timeout_message(timeout))
        elif not _read_until(fd, buf, time.monotonic() + OPEN_WAIT, None):  # an error before ready
            raise QueryError(f"query stopped: the store could not be opened within {OPEN_WAIT:g} s")
        proc.wait()
        try:
            kind, payload = pickle.loads(bytes(buf))
        except Exception:  # noqa: BLE001 - a child killed by the ceiling leaves a torn or no answer
            raise QueryError(_died(proc.returncode, memory_bytes)) from None
    except BrokenPipeError:
        proc.wait()
        raise QueryError(_died(proc.returncode, memory_bytes)) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    if kind == "ok":
        result: QueryResult = payload
        return result
    raise QueryError(str(payload))


def _died(returncode: int | None, memory_bytes: int) -> str:
    how = f"signal {signal.Signals(-returncode).name}" if returncode and returncode < 0 else f"exit {returncode}"
    return (f"query stopped: its process ended without an answer ({how}), most likely over the "
            f"{memory_bytes / 2**30:g} GB memory limit")
