"""Alternating rounds: the one timing discipline every benchmark here follows."""

from __future__ import annotations

import gc
import shutil
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

__all__ = ["alternate", "median", "scratch_dir"]

_A = TypeVar("_A")
_B = TypeVar("_B")


def alternate(
    rounds: int, looptrace: Callable[[], _A], baseline: Callable[[], _B]
) -> tuple[list[_A], list[_B]]:
    """Run both measurements ``rounds`` times, swapping which goes first each round, so drift
    (a warming cache, a neighbour's job) is shared rather than charged to whichever ran second."""
    a: list[_A] = []
    b: list[_B] = []
    for i in range(rounds):
        # The collector runs between measurements: garbage left by one must not be collected inside the other.
        if i % 2 == 0:
            gc.collect()
            a.append(looptrace())
            gc.collect()
            b.append(baseline())
        else:
            gc.collect()
            b.append(baseline())
            gc.collect()
            a.append(looptrace())
    return a, b


def median(values: list[float]) -> float:
    return statistics.median(values)


@contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=f"looptrace-bench-{prefix}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
