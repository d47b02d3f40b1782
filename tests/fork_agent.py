"""Traced runs in child processes, one way of starting them per mode, for ``test_fork_children.py``.

usage: python -m tests.fork_agent DB MODE [--parent]
Every child does one run of ``STEPS`` steps and leaves the way its start method makes it leave
(``os._exit`` for fork and forkserver children and pool workers). No child calls ``shutdown()``:
what is stored is what looptrace saved on its own.

With ``--parent`` the program is shaped the way that hung (issue 24): ``Tracing(...)`` is made at
import time (from ``FORK_AGENT_DB``, so a spawn child re-importing this module makes its own, as
users' programs do), and the parent traces a run of its own before it starts any child, so the
processors' threads and locks are live at the moment of ``fork()``. Mode ``issue24`` is the issue's
program: 3 fork ``Process`` children, then a fork ``Pool(2).map`` over 4 tasks.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from looptrace.tracer import Tracing

STEPS = 6
# The parent's, inherited by forked children; made at import time when FORK_AGENT_DB is set.
_TRACING: Tracing | None = Tracing(os.environ["FORK_AGENT_DB"]) if os.environ.get("FORK_AGENT_DB") else None


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
CHILDREN = {"process": 3, "pool": 4, "executor": 4, "os.fork": 3, "issue24": 7}


def _processes(ctx: multiprocessing.context.BaseContext, prefix: str = "p") -> None:
    procs = [ctx.Process(target=_child, args=(_DB, f"{prefix}{i}")) for i in range(CHILDREN["process"])]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


def _pool(ctx: multiprocessing.context.BaseContext) -> None:
    with ctx.Pool(2, initializer=_set_db, initargs=(_DB,)) as pool:
        assert pool.map(traced_run, [f"t{i}" for i in range(CHILDREN["pool"])]) != []
    # leaving ``with`` terminates the workers (SIGTERM), as most pool users do


def main() -> None:
    db, mode = sys.argv[1], sys.argv[2]
    parent = "--parent" in sys.argv[3:]
    globals()["_DB"] = db
    kind, _, method = mode.partition(":")
    if parent:
        assert _TRACING is not None, "--parent needs FORK_AGENT_DB: Tracing is made at import time"
        traced_run("parent")  # the processors' threads now run, and hold their locks now and then
    elif method in ("", "fork"):
        globals()["_TRACING"] = Tracing(db)  # made before the fork: the children inherit it
    ctx = multiprocessing.get_context(method or "fork")
    if kind == "process":
        _processes(ctx)
    elif kind == "pool":
        _pool(ctx)
    elif kind == "issue24":
        _processes(ctx)
        _pool(ctx)
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
