"""Start-up of the ``looptrace`` command against the floor it cannot go below: importing duckdb.

Every command reads a DuckDB store, so ``python -c "import duckdb"`` is the honest baseline; the
goal is at most twice that for ``looptrace --help`` and for ``looptrace sql --db X "SELECT 1"``.
Each measurement is a fresh process (that is what a user pays), timed wall-clock from spawn to
exit, alternated round by round with the baseline. Heavy imports (anthropic, textual, the
OpenTelemetry SDK, protobuf) show up here as soon as a command module or a package ``__init__``
pulls them in at start-up.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from looptrace.tracer.store import Store

from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = 'cli_startup: a fresh `looptrace` process vs python -c "import duckdb"'
GOAL = 2.0
# The console script a user runs, when installed; else the same entry point through -m.
_SCRIPT = Path(sys.executable).with_name("looptrace")
_LOOPTRACE = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "looptrace.tracer.cli"]
_BASELINE = [sys.executable, "-c", "import duckdb"]


_NOTE = "looptrace's modules byte-compiled first, as pip install does (the editable install has no bytecode)"


def _seconds(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _measure(what: str, argv: list[str], rounds: int) -> Result:
    _seconds(argv), _seconds(_BASELINE)  # warm the page cache for both before timing
    ours, base = alternate(rounds, lambda: _seconds(argv), lambda: _seconds(_BASELINE))
    a, b = median(ours) * 1e3, median(base) * 1e3
    return Result(what, "ms", a, b, f"<= {GOAL:g}x", a <= GOAL * b, _NOTE)


def _byte_compile() -> None:
    """Compile looptrace's modules as ``pip install`` does for an installed package. The checkout's
    editable install has no bytecode of its own, and with PYTHONDONTWRITEBYTECODE set (as on our CI
    machines) every start would compile looptrace from source while duckdb, the baseline, loads the
    bytecode pip wrote: a handicap a user's installation does not have."""
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("tracer", "loop", "replay", "viewer"):
        compileall.compile_dir(root / package, quiet=1)


def run(quick: bool = False) -> list[Result]:
    rounds = 5 if quick else 15
    _byte_compile()
    with scratch_dir("cli") as tmp:
        db = Path(tmp) / "cli.duckdb"
        Store(db).compact()  # creates the store file
        return [
            _measure("looptrace --help", [*_LOOPTRACE, "--help"], rounds),
            _measure('looptrace sql "SELECT 1"', [*_LOOPTRACE, "sql", "--db", str(db), "SELECT 1"], rounds),
        ]
