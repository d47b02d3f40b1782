"""Scoring the analyzer against labelled runs: per-class precision and recall, and leave-one-source-out.

Leave-one-source-out is the honest estimate for agents the analyzer has not seen: for each source in
turn, thresholds are chosen (best macro-F1 over ``GRID``) on the other sources only, and the held-out
source is diagnosed with them; the held-out predictions of all folds are pooled. The rules never see
the source: it only decides which runs are held out. Pure functions over plain data.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from .rules import diagnose
from .thresholds import DEFAULT_THRESHOLDS, Thresholds
from .views import RunView

__all__ = ["CLASSES", "GRID", "Fold", "metrics", "show", "predict", "settings", "choose", "leave_one_source_out"]

CLASSES = ("ok", "cap_hit", "stagnation", "context_bomb", "hallucinated_tool", "error", "incomplete", "other")

# The thresholds a fold may choose among. Small on purpose: every point is a plausible setting, so
# choosing among them on three sources cannot fit the fourth by the accident of a fine grid.
GRID: dict[str, Sequence[object]] = {
    "repeat_min": (3, 4, 5, 6),
    "fail_repeat_min": (3, 4, 5),
    "hallucination_share": (0.2, 0.3, 0.5),
    "context_near": (0.8, 0.9),
    "observation_share": (0.25, 0.5),
}

Pairs = list[tuple[str, str]]


@dataclass(frozen=True)
class Fold:
    held_out: str
    chosen: dict[str, object]
    pairs: Pairs  # (truth, predicted) for the held-out runs


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
    """run id -> primary label, ``other`` when no rule explains the run."""
    out = {}
    for run in runs:
        found = diagnose(run, t)
        out[run.run_id] = found[0].label if found else "other"
    return out


def settings() -> list[Thresholds]:
    """Every point of ``GRID``, the defaults first (so ties go to the defaults)."""
    names = list(GRID)
    points = [replace(DEFAULT_THRESHOLDS, **dict(zip(names, values)))  # type: ignore[arg-type]
              for values in itertools.product(*(GRID[n] for n in names))]
    return [DEFAULT_THRESHOLDS] + [p for p in points if p != DEFAULT_THRESHOLDS]


def choose(runs: Sequence[RunView], truth: dict[str, str], predictions: Sequence[dict[str, str]]) -> int:
    """Index of the setting with the best macro-F1 on ``runs`` (ties: the earliest)."""
    scores = [_macro_f1([(truth[r.run_id], p[r.run_id]) for r in runs]) for p in predictions]
    return max(range(len(predictions)), key=lambda i: (scores[i], -i))


def leave_one_source_out(runs: Sequence[RunView], source: dict[str, str], truth: dict[str, str]) -> list[Fold]:
    points = settings()
    predictions = [predict(runs, t) for t in points]
    folds = []
    for name in sorted(set(source.values())):
        train = [r for r in runs if source[r.run_id] != name]
        i = choose(train, truth, predictions)
        folds.append(Fold(name, {k: getattr(points[i], k) for k in GRID},
                          [(truth[r.run_id], predictions[i][r.run_id]) for r in runs if source[r.run_id] == name]))
    return folds
