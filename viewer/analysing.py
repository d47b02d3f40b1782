"""Runs the viewer shows without a diagnosis are analysed in a thread worker, once per session.

Most runs arrive diagnosed (``demo``, ``import`` and ``collect`` analyse what they store), but a
store written by a traced agent, or before that existed, has none; the viewer then runs the same
incremental analysis (``replay.auto_analyze``) on what it shows rather than telling the user to go
and run ``looptrace analyze``. A run is tried once per session: one that ended abnormally and
matches no rule stays without a diagnosis, and must not be analysed on every refresh. A Parquet
export is read-only, so it is never analysed here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

from looptrace.replay.auto_analyze import analyze_new
from looptrace.tracer.store import Store

__all__ = ["Analyser"]

# Still being written (``running``: a preview of a trace `looptrace collect` holds open): analysed once
# it has ended.
_NOT_YET = ("incomplete", "running", None)


class Analyser:
    def __init__(self, store: object) -> None:
        self.store = store
        self.enabled = isinstance(store, Store)
        self._tried: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, runs: Iterable[tuple[str, str | None, bool]]) -> list[str]:
        """The run ids to analyse now, among ``(run_id, status, has_diagnosis)``; each is claimed once."""
        if not self.enabled:
            return []
        with self._lock:
            ids = [r for r, status, diagnosed in runs if not diagnosed and status not in _NOT_YET
                   and r not in self._tried]
            self._tried.update(ids)
        return ids

    def tried(self, run_id: str) -> bool:
        with self._lock:
            return run_id in self._tried

    def analyse(self, run_ids: Sequence[str]) -> int:
        """Diagnose ``run_ids`` (in a worker thread); how many got a diagnosis."""
        assert isinstance(self.store, Store)
        return sum(1 for r in analyze_new(self.store, run_ids) if r.diagnoses)
