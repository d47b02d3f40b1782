"""Printing query results for a terminal, CSV or JSON: every cell escaped for display first."""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TextIO

from .terminal import visible

__all__ = ["format_table", "write_rows", "cell_text"]

MAX_CELL = 60


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (datetime, date)):
        return value.isoformat(sep=" ", timespec="seconds") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, (list, dict)):
        value = json.dumps(value, ensure_ascii=False, default=str)
    return visible(str(value), newlines=False)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, max_cell: int = MAX_CELL) -> str:
    cells = [[_clip(cell_text(v), max_cell) for v in row] for row in rows]
    heads = [_clip(visible(c, newlines=False), max_cell) for c in columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    numeric = [
        all(isinstance(row[i], (int, float, Decimal)) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(heads), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def write_rows(
    out: TextIO, columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table"
) -> None:
    if fmt == "csv":
        # CSV stays exact for files and pipes; on a terminal, control characters are shown escaped.
        tty = out.isatty() if hasattr(out, "isatty") else False
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows([["" if v is None else visible(v) if tty and isinstance(v, str) else v for v in r]
                          for r in rows])
    elif fmt == "json":
        # ASCII escapes keep JSON exact and never put a control or bidi character on the terminal.
        json.dump([dict(zip(columns, r)) for r in rows], out, ensure_ascii=True, default=str, indent=1)
        out.write("\n")
    else:
        width = shutil.get_terminal_size((120, 20)).columns
        out.write(format_table(columns, rows, max_cell=max(32, min(MAX_CELL, width // max(1, len(columns))))))
        out.write(f"\n({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def to_text(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table") -> str:
    buf = io.StringIO()
    write_rows(buf, columns, rows, fmt)
    return buf.getvalue()
