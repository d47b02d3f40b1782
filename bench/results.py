"""One line of a benchmark's table, and how it is printed and saved."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Result", "format_table", "as_json"]

_FORMATS = {
    "us/step": "{:,.1f}",
    "us/span": "{:,.1f}",
    "steps/s": "{:,.0f}",
    "%": "{:.1f}%",
    "ms": "{:.2f}",
    "spans/s": "{:,.0f}",
    "MB": "{:,.0f}",
    "B": "{:,.0f}",
}


@dataclass(frozen=True)
class Result:
    """``ratio`` is looptrace / baseline; ``passed`` says whether ``goal`` was met."""

    what: str
    unit: str
    looptrace: float
    baseline: float
    goal: str
    passed: bool
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.looptrace / self.baseline if self.baseline else float("inf")

    def cells(self) -> list[str]:
        fmt = _FORMATS.get(self.unit, "{:,.3g}")
        return [
            f"{self.what} ({self.unit})",
            fmt.format(self.looptrace),
            fmt.format(self.baseline),
            f"{self.ratio:.2f}x",
            self.goal,
            "PASS" if self.passed else "MISS",
        ]


_HEADER = ["what", "looptrace", "baseline", "ratio", "goal", "result"]


def format_table(title: str, results: list[Result]) -> str:
    rows = [_HEADER, *(r.cells() for r in results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEADER))]

    def line(row: list[str]) -> str:
        # Text columns left-aligned, figures right-aligned.
        return "  ".join(
            cell.ljust(w) if i in (0, 4, 5) else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()

    out = [title, line(rows[0]), line(["-" * w for w in widths])]
    out += [line(row) for row in rows[1:]]
    out += [f"  note: {r.note}" for r in results if r.note]
    return "\n".join(out)


def as_json(result: Result) -> dict[str, Any]:
    return {**asdict(result), "ratio": result.ratio}
