"""A traced agent run as a separate process by the concurrency and crash tests.

usage: python -m tests.proc_agent DB AGENT STEPS CALLS [SLEEP_SECONDS [HOLD_AT]]
Writes "started <run_id>" to stdout once the run has begun, then one "step N" line per step. With
HOLD_AT, it stops after that step, mid-run, until a line (or the end) comes on its stdin: a test looks
at the store while the writer is still running, however slow the machine, instead of racing it.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from looptrace.tracer import Tracing


def main() -> None:
    db, agent, steps, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    hold_at = int(sys.argv[6]) if len(sys.argv) > 6 else None
    tracing = Tracing(db, schedule_delay_millis=100)
    with tracing.run(agent, task=f"task of {agent}", model="scripted") as run, ThreadPoolExecutor(calls) as pool:
        print("started", run.run_id, flush=True)
        for i in range(steps):
            with run.step(f"step {i} of {agent}") as step:

                def call(k: int, step=step, i=i) -> None:
                    with step.tool_call("echo", {"i": i, "k": k}, call_id=f"{agent}-{i}-{k}") as c:
                        c.result(f"{agent} {i} {k}")

                list(pool.map(call, range(calls)))
            print("step", i + 1, flush=True)
            if i + 1 == hold_at:
                sys.stdin.readline()
            if pause:
                time.sleep(pause)
        run.finish("ok", answer=agent)
    tracing.shutdown()
    print("done", flush=True)


if __name__ == "__main__":
    main()
