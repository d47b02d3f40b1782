"""What ``looptrace analyze`` prints: a table sorted by run start, CSV or JSON. Pure formatting.

The table wraps long cells instead of cutting them (an explanation cut mid-argument names the wrong
command), and every piece of trace text goes through ``terminal.visible`` first: run ids, agents and
explanations quote what models and tools wrote.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, is_dataclass
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from looptrace.tracer.cli.terminal import visible

from .analyzer import RunDiagnoses

__all__ = ["Row", "rows_for", "table", "csv_text", "json_text", "summary", "FORMATS"]

FORMATS = ("table", "csv", "json")
_SENTENCE = re.compile(r"(?<=[.;:])\s")


@dataclass(frozen=True)
class Row:
    result: RunDiagnoses
    agent: str | None
    started_at: datetime | None

    @property
    def label(self) -> str:
        return self.result.primary.label if self.result.primary else "(none)"

    def evidence(self, full: bool) -> str:
        p = self.result.primary
        if p is None:
            return "no rule explains how this run ended"
        text = p.explanation if full else _first_sentence(p.explanation)
        steps = "" if p.first_step is None else (
            f"step {p.first_step}: " if p.first_step == p.last_step else f"steps {p.first_step}-{p.last_step}: ")
        also = [d.label for d in self.result.diagnoses[1:]]
        if full:
            return steps + text + (f" (also: {', '.join(also)})" if also else "")
        # A loop the agent recovered from is wasted spend a user wants to see even on a run that ended well.
        loops = [d for d in self.result.diagnoses[1:] if d.label == "stagnation" and d.first_step is not None]
        return steps + text + "".join(f" (also: stagnation, steps {d.first_step}-{d.last_step})" for d in loops[:1])


_CAUSE = 160  # characters of what a first sentence's colon introduces (an error's cause) in the short table


def _first_sentence(text: str) -> str:
    """The explanation's first sentence; one that ends on a colon keeps what the colon introduces (the
    error a run ended on: "The run ended on an error at step 8" alone tells nothing), its first line,
    cut to ``_CAUSE`` characters."""
    parts = _SENTENCE.split(text, maxsplit=1)
    if len(parts) == 1:
        return text
    head, rest = parts
    if not head.endswith(":"):
        return head.rstrip(";")
    cause = rest.strip().splitlines()[0].strip() if rest.strip() else ""
    if not cause:
        return head.rstrip(":")
    return head + " " + (cause if len(cause) <= _CAUSE else cause[:_CAUSE - 1].rstrip() + "…")


def rows_for(results: Sequence[RunDiagnoses], runs: dict[str, tuple[str | None, datetime | None]]) -> list[Row]:
    """Rows in order of run start (runs with no start last, then by id)."""
    rows = [Row(r, *runs.get(r.run_id, (None, None))) for r in results]
    return sorted(rows, key=lambda r: (r.started_at is None, r.started_at or datetime.min, r.result.run_id))


def table(rows: Sequence[Row], *, full: bool = False, width: int | None = None) -> str:
    t = Table(show_lines=full, expand=False, highlight=False)
    for name, wrap in (("run", False), ("agent", True), ("label", False), ("evidence", True)):
        t.add_column(name, no_wrap=not wrap, overflow="fold")
    for r in rows:
        run_id = r.result.run_id if full else r.result.run_id[:12]
        t.add_row(*(Text(visible(x, newlines=False)) for x in (run_id, r.agent or "", r.label, r.evidence(full))))
    console = Console(file=io.StringIO(), width=width or 120, color_system=None, markup=False, highlight=False,
                      emoji=False, legacy_windows=False)
    console.print(t)
    return console.file.getvalue().rstrip("\n")  # type: ignore[attr-defined]


def csv_text(rows: Sequence[Row]) -> str:
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["run_id", "agent", "started_at", "status", "label", "secondary", "first_step", "last_step",
                "explanation"])
    for r in rows:
        p = r.result.primary
        w.writerow([r.result.run_id, r.agent or "", r.started_at.isoformat() if r.started_at else "", r.result.status,
                    r.label, " ".join(d.label for d in r.result.diagnoses[1:]),
                    "" if p is None or p.first_step is None else p.first_step,
                    "" if p is None or p.last_step is None else p.last_step,
                    p.explanation if p else ""])
    return out.getvalue()


def _plain(value: Any) -> Any:
    """What ``json`` cannot write itself: a dataclass as its fields, anything else (a datetime) as text."""
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else str(value)


def json_text(rows: Sequence[Row]) -> str:
    """A JSON array, one run a line. Each line goes through json's C encoder (``indent=`` takes its
    Python one) and a diagnosis's fields are not deep-copied first (``asdict``): at 20,000 runs the
    output took 0.8 s of CPU that way, after an analysis of ~10 s."""
    lines = (json.dumps({"run_id": r.result.run_id, "agent": r.agent, "started_at": r.started_at,
                         "status": r.result.status, "diagnoses": [dict(vars(d)) for d in r.result.diagnoses]},
                        default=_plain) for r in rows)
    return "[\n" + ",\n".join(lines) + "\n]\n" if rows else "[]\n"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary(rows: Sequence[Row]) -> str:
    """``3 runs analysed: ok 2, stagnation 1``; ``1 run analysed: ok 1``."""
    counts = Counter(r.label for r in rows)
    return f"{_plural(len(rows), 'run')} analysed" + (
        ": " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) if counts else "")
