"""Traced runs in child processes, one way of starting them per mode, for ``test_fork_children.py``.

usage: python -m tests.fork_agent DB MODE
Every child does one run of ``STEPS`` steps and leaves the way its start method makes it leave
(``os._exit`` for fork and forkserver children and pool workers). No child calls ``shutdown()``:
what is stored is what looptrace saved on its own. The parent traces nothing itself.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from looptrace.tracer import Tracing

STEPS = 6
_TRACING: Tracing | None = None  # the parent's, inherited by forked children


def traced_run(name: str) -> str:
    tracing = _TRACING
    if tracing is None:  # a spawn or forkserver child: a fresh interpreter makes its own, as users do
        tracing = Tracing(_DB)
        globals()["_TRACING"] = tracing
    with tracing.run(f"child-{name}", task=f"task {name}", model="scripted") as run:
        for i in range(STEPS):
            with run.step(f"step {i}") as step, step.tool_call("echo", {"i": i}) as call:
                call.result(f"{name} {i}")
        run.finish("ok", answer=name)
    return name


def _set_db(db: str) -> None:
    globals()["_DB"] = db


def _child(db: str, name: str) -> None:
    _set_db(db)
    traced_run(name)


_DB = ""
CHILDREN = {"process": 3, "pool": 4, "executor": 4, "os.fork": 3}


def main() -> None:
    db, mode = sys.argv[1], sys.argv[2]
    globals()["_DB"] = db
    kind, _, method = mode.partition(":")
    if method in ("", "fork"):
        globals()["_TRACING"] = Tracing(db)  # made before the fork: the children inherit it
    ctx = multiprocessing.get_context(method or "fork")
    if kind == "process":
        procs = [ctx.Process(target=_child, args=(db, f"p{i}")) for i in range(CHILDREN[kind])]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    elif kind == "pool":
        with ctx.Pool(2, initializer=_set_db, initargs=(db,)) as pool:
            assert pool.map(traced_run, [f"t{i}" for i in range(CHILDREN[kind])]) != []
        # leaving ``with`` terminates the workers (SIGTERM), as most pool users do
    elif kind == "executor":
        with ProcessPoolExecutor(2, mp_context=ctx, initializer=_set_db, initargs=(db,)) as ex:
            list(ex.map(traced_run, [f"e{i}" for i in range(CHILDREN[kind])]))
    elif kind == "os.fork":
        for i in range(CHILDREN[kind]):
            pid = os.fork()
            if pid == 0:
                try:
                    traced_run(f"f{i}")
                finally:
                    os._exit(0)  # as a forked worker leaves: no exit hooks at all
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
    print("done", flush=True)


if __name__ == "__main__":
    main()
