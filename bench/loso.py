"""``python -m bench.loso [--corpus DIR] [--db PATH]``: leave-one-source-out accuracy of the analyzer.

The shared corpus (``../shared/corpora``, labels.csv as shipped) has four sources. For each source in
turn, the thresholds are chosen on the other three (the grid below, best macro-F1 over the classes
present there) and the runs of the held-out source are diagnosed with them. The held-out predictions
of the four folds are pooled into one confusion matrix: that, not the all-in score, estimates how the
analyzer does on agents it has not seen. The rules themselves never look at a source, path or agent.

The corpus is imported once into ``--db`` (a temporary file by default) through the ordinary importer.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from looptrace.replay.analyzer import DEFAULT_THRESHOLDS, RunView, Thresholds, diagnose, load_runs
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store

__all__ = ["CLASSES", "GRID", "metrics", "show", "predict", "choose", "main"]

CLASSES = ("ok", "cap_hit", "stagnation", "context_bomb", "hallucinated_tool", "other")
CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpora"

# The thresholds a fold may choose among. Small on purpose: every point is a plausible setting, so
# choosing among them on three sources cannot fit the fourth by accident of a fine grid.
GRID: dict[str, Sequence[object]] = {
    "repeat_min": (3, 4, 5, 6),
    "hallucination_share": (0.2, 0.3, 0.5),
    "context_near": (0.8, 0.9),
    "observation_share": (0.25, 0.5),
}

Pairs = list[tuple[str, str]]


def metrics(pairs: Iterable[tuple[str, str]]) -> tuple[Counter[tuple[str, str]], dict[str, tuple[float, float, int]]]:
    """(confusion of (truth, predicted), class -> (precision, recall, support)); an empty class scores 1."""
    confusion = Counter(pairs)
    out = {}
    for c in CLASSES:
        tp = confusion[(c, c)]
        predicted = sum(confusion[(t, c)] for t in CLASSES)
        actual = sum(confusion[(c, p)] for p in CLASSES)
        out[c] = (tp / predicted if predicted else 1.0, tp / actual if actual else 1.0, actual)
    return confusion, out


def show(title: str, pairs: Pairs) -> str:
    confusion, scores = metrics(pairs)
    lines = [title, "truth \\ predicted".ljust(20) + "".join(c[:12].rjust(13) for c in CLASSES)]
    lines += [t.ljust(20) + "".join(str(confusion[(t, p)]).rjust(13) for p in CLASSES) for t in CLASSES]
    lines += [f"{c:20} precision {p:.3f}  recall {r:.3f}  (n={n})" for c, (p, r, n) in scores.items()]
    right = sum(n for (t, p), n in confusion.items() if t == p)
    lines.append(f"{'accuracy':20} {right / max(1, len(pairs)):.3f}  ({right} of {len(pairs)})")
    return "\n".join(lines)


def _macro_f1(pairs: Pairs) -> float:
    _, scores = metrics(pairs)
    present = [(p, r) for c, (p, r, n) in scores.items() if n]
    return sum(2 * p * r / (p + r) if p + r else 0.0 for p, r in present) / max(1, len(present))


def predict(runs: Sequence[RunView], t: Thresholds) -> dict[str, str]:
    out = {}
    for run in runs:
        found = diagnose(run, t)
        out[run.run_id] = found[0].label if found else "other"
    return out


def _settings() -> list[Thresholds]:
    names = list(GRID)
    return [replace(DEFAULT_THRESHOLDS, **dict(zip(names, values)))  # type: ignore[arg-type]
            for values in itertools.product(*(GRID[n] for n in names))]


def choose(runs: Sequence[RunView], truth: dict[str, str], settings: Sequence[Thresholds],
           predictions: Sequence[dict[str, str]]) -> int:
    """Index of the setting with the best macro-F1 on ``runs`` (ties: the earliest, nearest the defaults)."""
    scores = [_macro_f1([(truth[r.run_id], p[r.run_id]) for r in runs]) for p in predictions]
    return max(range(len(settings)), key=lambda i: (scores[i], -i))


def _load(corpus: Path, db: Path) -> tuple[list[RunView], dict[str, str], dict[str, str]]:
    store = Store(db)
    with store.reader(locked_down=False) as conn:
        empty = conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    if empty:
        import_paths(store, [corpus])
    root = corpus.resolve()
    labels = {str(root / r["file"]): (r["source"], r["label"]) for r in csv.DictReader(open(corpus / "labels.csv"))}
    with store.reader(locked_down=False) as conn:
        path = dict(conn.execute("SELECT run_id, source FROM runs").fetchall())
        runs = [r for r in load_runs(conn) if path.get(r.run_id) in labels]
    return runs, {r.run_id: labels[path[r.run_id]][0] for r in runs}, {r.run_id: labels[path[r.run_id]][1] for r in runs}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loso", description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--db", type=Path, default=None, help="store to import into (reused if it has runs)")
    args = parser.parse_args(argv)
    if not (args.corpus / "labels.csv").exists():
        print(f"no corpus at {args.corpus}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        runs, source, truth = _load(args.corpus, args.db or Path(tmp) / "corpus.duckdb")
    settings = _settings()
    predictions = [predict(runs, t) for t in settings]
    default = predictions[settings.index(DEFAULT_THRESHOLDS)] if DEFAULT_THRESHOLDS in settings else predict(
        runs, DEFAULT_THRESHOLDS)
    held_out: Pairs = []
    for name in sorted(set(source.values())):
        train = [r for r in runs if source[r.run_id] != name]
        test = [r for r in runs if source[r.run_id] == name]
        i = choose(train, truth, settings, predictions)
        chosen = {k: getattr(settings[i], k) for k in GRID}
        pairs = [(truth[r.run_id], predictions[i][r.run_id]) for r in test]
        held_out += pairs
        right = sum(t == p for t, p in pairs)
        print(f"held out {name}: {len(test)} runs, {right} right ({right / max(1, len(test)):.3f}); "
              f"thresholds chosen on the other three: {chosen}")
    print()
    print(show("LEAVE-ONE-SOURCE-OUT (held-out predictions of the four folds, pooled)", held_out))
    print()
    print(show("all-in, default thresholds (for reference only)", [(truth[r], p) for r, p in default.items()]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
