"""``python -m bench.loso [--corpus DIR] [--db PATH]``: leave-one-source-out accuracy of the analyzer.

The shared corpus (``../shared/corpora``, labels.csv as shipped) has four sources. For each in turn,
thresholds are chosen on the other three and the held-out source is diagnosed with them
(``looptrace.replay.analyzer.scoring``); the held-out predictions are pooled per class. That, not the
all-in score printed after it, estimates how the analyzer does on agents it has not seen.

The corpus is imported once into ``--db`` (a temporary file by default) through the ordinary importer.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from looptrace.replay.analyzer import DEFAULT_THRESHOLDS, RunView, diagnose, load_runs
from looptrace.replay.analyzer.scoring import GRID, leave_one_source_out, predict, show
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store

__all__ = ["CORPUS", "load_corpus", "findings_report", "main"]

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"


def load_corpus(corpus: Path, db: Path) -> tuple[list[RunView], dict[str, str], dict[str, str]]:
    """(runs, run id -> source, run id -> label as shipped), importing the corpus into ``db`` if empty."""
    store = Store(db)
    empty = not db.exists()
    if not empty:
        with store.reader(locked_down=False) as conn:
            empty = conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    if empty:
        import_paths(store, [corpus])
    root = corpus.resolve()
    labels = {str(root / r["file"]): (r["source"], r["label"]) for r in csv.DictReader(open(corpus / "labels.csv"))}
    with store.reader(locked_down=False) as conn:
        path = dict(conn.execute("SELECT run_id, source FROM runs").fetchall())
        runs = [r for r in load_runs(conn) if path.get(r.run_id) in labels]
    return (runs, {r.run_id: labels[path[r.run_id]][0] for r in runs},
            {r.run_id: labels[path[r.run_id]][1] for r in runs})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loso", description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--db", type=Path, default=None, help="store to import into (reused if it has runs)")
    args = parser.parse_args(argv)
    if not (args.corpus / "labels.csv").exists():
        print(f"no corpus at {args.corpus}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        runs, source, truth = load_corpus(args.corpus, args.db or Path(tmp) / "corpus.duckdb")
    folds = leave_one_source_out(runs, source, truth)
    for f in folds:
        right = sum(t == p for t, p in f.pairs)
        print(f"held out {f.held_out}: {len(f.pairs)} runs, {right} right ({right / max(1, len(f.pairs)):.3f}); "
              f"thresholds chosen on the others: {f.chosen}")
    print()
    print(show("LEAVE-ONE-SOURCE-OUT (held-out predictions of the four folds, pooled)",
               [p for f in folds for p in f.pairs]))
    print()
    default = predict(runs, DEFAULT_THRESHOLDS)
    print(show("all-in, default thresholds (for reference only)", [(truth[r], p) for r, p in default.items()]))
    print()
    print(findings_report(runs, truth))
    return 0


def findings_report(runs: Sequence[RunView], truth: dict[str, str]) -> str:
    """Stagnation findings (primary or secondary) per label, for each ``fail_repeat_min`` of the grid and 2:
    the labels score only the primary label, so this is where the threshold of the "repeated failing
    calls" finding, mostly secondary, shows its false alarms (findings on runs labelled ok)."""
    lines = ["stagnation findings, primary or secondary, by label (fail_repeat_min: runs with a 'failing' finding; "
             "runs labelled ok with any stagnation finding)"]
    for n in sorted({2, *GRID["fail_repeat_min"]}):  # 2: one below the grid, to show what it would cost
        t = replace(DEFAULT_THRESHOLDS, fail_repeat_min=n)  # type: ignore[arg-type]
        failing: Counter[str] = Counter()
        alarms = []
        for run in runs:
            stuck = [d for d in diagnose(run, t) if d.label == "stagnation"]
            if any(d.evidence.get("kind") == "failing" for d in stuck):
                failing[truth[run.run_id]] += 1
            if stuck and truth[run.run_id] == "ok":
                alarms.append(f"    {run.run_id}: {'primary' if stuck[0].is_primary else 'secondary'} "
                              f"{stuck[0].evidence.get('kind')}: {stuck[0].explanation[:100]}")
        ok = sum(1 for r in runs if truth[r.run_id] == "ok")
        lines.append(f"  fail_repeat_min={n}: failing findings by label {dict(sorted(failing.items()))}; "
                     f"ok runs with a stagnation finding: {len(alarms)} of {ok}")
        lines += alarms
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
