"""``terminate()`` of a child whose main thread waits in C, for ``test_sigterm_children.py``.

usage: python -m tests.terminate_agent   (with TERMINATE_AGENT_DB set: ``Tracing`` is made at import
time, so a spawn or forkserver child, importing this module, makes its own as users' programs do)

For each start method the parent holds a ``multiprocessing`` lock and starts a child that waits for
it, the way a pool worker waits on the task queue's lock that ``Pool.terminate`` holds for good. A
second thread of the child, one that does not block SIGTERM (as numpy's OpenBLAS thread does not),
takes the SIGTERM. Printed per method: the child's exit code, or ``alive`` if it outlived the signal
by ``WAIT`` seconds (issue 24: such a worker never ended, and ``Pool.terminate`` joined it forever).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

from looptrace.tracer import Tracing

WAIT = 10.0
_TRACING = Tracing(os.environ["TERMINATE_AGENT_DB"]) if os.environ.get("TERMINATE_AGENT_DB") else None


def _sigterm_to_this_thread(ready: threading.Event) -> None:
    ready.wait()
    time.sleep(0.2)  # let the main thread reach its wait (it also fails the test if it has not: see the test)
    signal.pthread_kill(threading.get_ident(), signal.SIGTERM)


def _child(lock: multiprocessing.synchronize.Lock) -> None:
    ready = threading.Event()
    threading.Thread(target=_sigterm_to_this_thread, args=(ready,), daemon=True).start()
    ready.set()
    lock.acquire()  # held by the parent for good


def main() -> None:
    assert _TRACING is not None, "set TERMINATE_AGENT_DB"
    print("parent", "SystemExit" if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None) else "default",
          flush=True)
    for method in ("fork", "forkserver", "spawn"):
        ctx = multiprocessing.get_context(method)
        lock = ctx.Lock()
        lock.acquire()
        p = ctx.Process(target=_child, args=(lock,))
        p.start()
        p.join(WAIT)
        print(method, "alive" if p.is_alive() else p.exitcode, flush=True)
        if p.is_alive():
            p.kill()
            p.join()


if __name__ == "__main__":
    main()
