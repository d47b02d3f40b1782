"""Redaction's cost per traced step: ``Tracing`` with the default redactor vs. with it disabled.

Each step is what an agent records: a model call whose request resends the growing history (so
the request identity is hashed on the redacted request, message by message), its response, and a
tool call with arguments and a result. Two kinds of run: ordinary steps (no secret anywhere, the
common case, which the batch test clears whole) and steps that each carry a secret in the tool
result and arguments (every batch then goes value by value and the manifest is written). Both
sides include ``shutdown()`` (the last flush and compaction), as ``tracer_overhead`` does.
"""

from __future__ import annotations

import time
from typing import Any

from looptrace.tracer.sink import Redactor
from looptrace.tracer.spans.tracing import Tracing

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "redaction: cost per traced step (model call + tool call), redactor on vs off"
GOAL_ORDINARY = 1.25  # set before measuring: redaction may add a quarter to an ordinary step
GOAL_SECRETS = 2.0  # and double a step that holds a secret in every batch
ROUNDS = 5
_FILE = "def main():\n    return compute(load('config.yaml'))\n" * 20  # ~1 KB of ordinary tool output


def _steps(tracing: Tracing, steps: int, secret: bool) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test in src/app.py."}]
    with tracing.run("bench", model="claude-haiku-4-5") as run:
        for i in range(steps):
            result = _FILE + (f"\nexport DB_PASSWORD=hunter{i:06d}x\nAuthorization: Bearer abcdefgh{i:08d}"
                              if secret else "")
            args = {"path": f"src/app{i % 7}.py", **({"token": f"tok-{i:012d}"} if secret else {})}
            with run.step(f"Read file {i}") as step:
                request = {"model": "claude-haiku-4-5", "max_tokens": 1024, "system": "Be brief.",
                           "messages": history[-40:]}  # an agent that keeps a window of its history
                with step.llm_call(request) as call:
                    call.response({"content": [{"type": "text", "text": f"Reading {i}"}], "stop_reason": "tool_use",
                                   "usage": {"input_tokens": 1000, "output_tokens": 20}})
                with step.tool_call("read_file", args) as tool:
                    tool.result(result)
            history += [{"role": "assistant", "content": f"Reading {i}"}, {"role": "user", "content": result}]
        run.finish("ok", answer="done")


def _timed(steps: int, secret: bool, redact: bool) -> float:
    with scratch_dir("redaction") as tmp:
        t0 = time.perf_counter()
        tracing = Tracing(tmp / "bench.duckdb", redactor=Redactor(enabled=redact))
        _steps(tracing, steps, secret)
        tracing.shutdown()
        return time.perf_counter() - t0


def run(quick: bool = False) -> list[Result]:
    steps = 300 if quick else 3_000
    _timed(50, True, True)  # warm-up: imports, compiled rules, cached Arrow schemas
    out = []
    for secret, goal in ((False, GOAL_ORDINARY), (True, GOAL_SECRETS)):
        on, off = alternate(ROUNDS, lambda s=secret: _timed(steps, s, True), lambda s=secret: _timed(steps, s, False))
        us_on, us_off = median(on) / steps * 1e6, median(off) / steps * 1e6
        what = "step with secrets" if secret else "ordinary step"
        note = f"{steps:,} steps x {ROUNDS} rounds, medians; baseline = the same run with Redactor(enabled=False)"
        out.append(Result(what, "us/step", us_on, us_off, f"ratio <= {goal:g}x", us_on / us_off <= goal, note))
    return out
