"""Diagnoses as runs land: the ``looptrace.on_stored`` hook, and the runs still lacking a diagnosis.

Incremental on purpose: a command that stored runs passes their ids, and only those are analysed
(new or changed: an imported duplicate is not stored again, so it is not passed). When the ids are
unknown, the runs without any diagnosis are analysed. ``looptrace analyze`` stays the way to
re-analyse everything, with other thresholds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from looptrace.tracer.store import Store

from .analyzer import RunDiagnoses, analyze_store

__all__ = ["PENDING_SQL", "pending_runs", "analyze_new", "summary", "on_stored"]

# A run with no diagnosis, or diagnosed ``incomplete`` (no end recorded yet: a trace whose root has
# not arrived), stays "pending": analysing it again is cheap, and it is right if more of it arrives later.
PENDING_SQL = """
SELECT r.run_id FROM runs r
WHERE NOT EXISTS (SELECT 1 FROM diagnoses d WHERE d.run_id = r.run_id AND d.label <> 'incomplete')
ORDER BY r.started_at, r.run_id
"""


def pending_runs(store: Store) -> list[str]:
    with store.reader(locked_down=False) as conn:
        return [r[0] for r in conn.execute(PENDING_SQL).fetchall()]


def analyze_new(store: Store, run_ids: Sequence[str] | None = None) -> list[RunDiagnoses]:
    """Diagnose ``run_ids`` (or, if None, every run that has no diagnosis yet) and store the result."""
    ids = list(run_ids) if run_ids is not None else pending_runs(store)
    if not ids:  # analyze_store reads an empty selection as "every run"
        return []
    return analyze_store(store, run_ids=ids)


def summary(results: Sequence[RunDiagnoses]) -> str:
    """``diagnosed 13 runs: 6 ok, 2 stagnation, ...`` (most frequent first)."""
    labels = Counter(r.primary.label if r.primary else "no diagnosis" for r in results)
    n = len(results)
    parts = ", ".join(f"{count} {label}" for label, count in sorted(labels.items(), key=lambda kv: (-kv[1], kv[0])))
    return f"diagnosed {n} run{'' if n == 1 else 's'}" + (f": {parts}" if parts else "")


def on_stored(db: str, run_ids: Sequence[str] | None) -> str | None:
    """The ``looptrace.on_stored`` hook: diagnose what was just stored."""
    from looptrace.tracer.export.source import open_source

    results = analyze_new(open_source(db), run_ids)  # a DuckDB store, or an Iceberg catalog (iceberg:NAME)
    return summary(results) if results else None
