"""Search across runs on a 1,000,000-step store: the first page of hits, as the search screen asks it.

The store is ``bigstore`` (10,000 runs x 100 steps, built by SQL through the bulk path), so every
thought, argument and observation is a real row of the base tables. Three needles: a common one
(hits in every run: the first page comes from a top-N over many matches), a rare one found in one
run only, and one found nowhere (the whole store is scanned: the worst case), each as a substring
(ILIKE) and as a regular expression. The baseline asks the same question naively: the ``steps``
view filtered with ILIKE (or regexp_matches) on each column, every matching row fetched, no limit.
"""

from __future__ import annotations

import time
from pathlib import Path

from looptrace.tracer.store import Store
from looptrace.viewer.search import SEARCH_LIMIT, search

from .bigstore import make_big_store
from .results import Result
from .rounds import alternate, median, scratch_dir

__all__ = ["TITLE", "run"]

TITLE = "search_speed: first page of hits across all runs (thoughts, arguments, observations)"
GOAL_MS = 1_000.0

# (what, needle, regex): the bigstore's texts are "thinking about step N", '{"path": "src/fN.py"}'
# and "contents of file N xxx..."; run000042's 42nd step says something no other step says.
NEEDLES = (
    ("common substring", "src/f7.py", False),
    ("rare substring", "the planted needle", False),
    ("absent substring", "nowhere-in-this-store", False),
    ("common regex", r"src/f7\.py", True),
    ("absent regex", r"nowhere-[0-9]+-in", True),
    # No literal to narrow it: every row of the three columns goes through RE2 (the worst case).
    ("regex, no literal", r"[0-9]{3}[z-z]", True),
)

_PLANT = """
UPDATE step_records SET thought = 'I found THE PLANTED NEEDLE here' WHERE run_id = 'run000042' AND step = 42
"""

_NAIVE = {
    False: "SELECT * FROM steps WHERE thought ILIKE $p OR CAST(args AS VARCHAR) ILIKE $p OR observation ILIKE $p",
    True: "SELECT * FROM steps WHERE regexp_matches(thought, $p, 'i') OR regexp_matches(CAST(args AS VARCHAR), $p, 'i') "
          "OR regexp_matches(observation, $p, 'i')",
}


def _ms(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - started) * 1e3


def _naive(store: Store, needle: str, regex: bool = False) -> None:
    with store.reader() as conn:
        conn.execute(_NAIVE[regex], {"p": needle if regex else f"%{needle}%"}).fetchall()


def run(quick: bool = False) -> list[Result]:
    runs = 1_000 if quick else 10_000
    rounds = 3 if quick else 5
    results = []
    with scratch_dir("search") as tmp:
        path = make_big_store(Path(tmp) / "big.duckdb", runs=runs)
        store = Store(path)
        with store.writer() as conn:
            conn.execute(_PLANT)
        search(store, "warm-up"), _naive(store, "warm-up")  # the file's pages in the OS cache
        for what, needle, regex in NEEDLES:
            found = search(store, needle, regex=regex)
            ours, theirs = alternate(
                rounds, lambda: _ms(lambda: search(store, needle, regex=regex)),
                lambda: _ms(lambda: _naive(store, needle, regex)),
            )
            ms, base = median(ours), median(theirs)
            hits = f"{len(found.hits)}{'+' if found.more else ''} hits"
            results.append(Result(f"{what} {needle!r}", "ms", ms, base, f"< {GOAL_MS:,.0f} ms", ms < GOAL_MS,
                                  f"{what}: {hits} (page of {SEARCH_LIMIT}) in {runs * 100:,} steps"))
    return results
