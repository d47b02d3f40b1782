"""Printing query results for a terminal, CSV or JSON: every cell escaped for display first.

``looptrace sql`` prints its table with rich, which wraps a long value inside its column rather
than cutting it: a value is cut only past ``MAX_WRAPPED`` characters, and never with ``full``.
A result too wide for that (``SELECT * FROM runs``: 23 columns squeezed into 4-character columns,
headings split over lines) is printed one record at a time instead, a column per line, as psql's
expanded display and DuckDB's ``.mode line`` do: values cut to the line with ``…`` unless ``full``.
(``format_table`` is the plain fixed-width layout other commands print their summaries with.)
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any, TextIO

from .plural import count
from .terminal import visible

__all__ = ["format_table", "write_rows", "cell_text", "rich_table", "fits", "column_widths", "vertical_lines",
           "MAX_WRAPPED"]

MAX_CELL = 60
MAX_WRAPPED = 500  # characters of one value in a wrapped table, unless --full
READABLE = 10  # columns narrower than this (or than their widest value) make a table unreadable
_PIPE_WIDTH = 160  # table width when stdout is not a terminal (COLUMNS overrides)


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
    numeric = [_numeric(rows, i) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(heads), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _numeric(rows: Sequence[Sequence[Any]], i: int) -> bool:
    return bool(rows) and all(isinstance(row[i], (int, float, Decimal)) or row[i] is None for row in rows)


def column_widths(columns: Sequence[str], cells: list[list[str]], width: int) -> list[int]:
    """Each column's width in a table ``width`` wide (3 blanks between columns): what its heading and
    values need if all fit, else its heading and at least ``READABLE`` characters of its values (as
    ``fits`` counts), the room left going to the first columns that want more. A heading is never
    split: rich, left to squeeze a table, split ``output_tokens`` into ``output_toke`` / ``ns`` at
    80 columns."""
    heads = [len(visible(h, newlines=False)) for h in columns]
    want = [max([h] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    widths = [max(h, min(READABLE, w)) for h, w in zip(heads, want)]
    left = width - sum(widths) - 3 * (len(widths) - 1)
    for i, w in enumerate(want):
        grow = max(0, min(left, w - widths[i]))
        widths[i] += grow
        left -= grow
    return widths


def rich_table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, full: bool = False,
               width: int | None = None) -> Any:
    """A ``rich.table.Table`` of the rows: every cell escaped text (never markup), long values
    wrapped inside their column, and cut at ``MAX_WRAPPED`` characters unless ``full``; in a table
    ``width`` wide, the columns are as ``column_widths`` lays them out."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    texts = [[c if full else _clip(c, MAX_WRAPPED) for c in map(cell_text, row)] for row in rows]
    widths = column_widths(columns, texts, width) if width is not None else [None] * len(columns)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="bold")
    for i, name in enumerate(columns):
        table.add_column(Text(visible(name, newlines=False)), justify="right" if _numeric(rows, i) else "left",
                         overflow="fold", width=widths[i])
    for row in texts:
        table.add_row(*(Text(c) for c in row))
    return table


def _plain_lines(columns: Sequence[str], cells: list[list[str]], numeric: list[bool], width: int) -> list[str] | None:
    """The table rich would print, when every value is ASCII and it fits in ``width`` unwrapped: the
    common case (``SELECT count(*) ...``) then costs no rich import and render (~0.1-0.2 s, which
    is most of a quick query's start-up). None when rich has to lay it out."""
    heads = [visible(c, newlines=False) for c in columns]
    if not all(t.isascii() for t in heads) or not all(t.isascii() for row in cells for t in row):
        return None
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(heads)]
    if sum(widths) + 3 * (len(widths) - 1) > width:
        return None

    def line(values: Sequence[str]) -> str:
        return "   ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    return [line(heads), "─" * (sum(widths) + 3 * (len(widths) - 1)), *(line(r) for r in cells)]


def fits(columns: Sequence[str], cells: list[list[str]], width: int) -> bool:
    """Whether a table of ``cells`` can give every column its whole heading and ``READABLE``
    characters (or all its values need)."""
    need = [max(len(visible(h, newlines=False)), min(READABLE, max([0] + [len(r[i]) for r in cells])))
            for i, h in enumerate(columns)]
    return sum(need) + 3 * (len(need) - 1) <= width


def vertical_lines(columns: Sequence[str], cells: list[list[str]], width: int, *, full: bool) -> list[str]:
    """One block per row, ``column │ value`` a line; a value is cut to the line unless ``full``."""
    heads = [visible(c, newlines=False) for c in columns]
    key = max(len(h) for h in heads)
    room = max(8, width - key - 3)
    out: list[str] = []
    for n, row in enumerate(cells, 1):
        title = f"─[ row {n} ]"
        out.append(title + "─" * max(0, min(width, key + 3 + room) - len(title)))
        out.extend(f"{h.ljust(key)} │ {v if full else _clip(v, room)}".rstrip() for h, v in zip(heads, row))
    return out


def _print_table(out: TextIO, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, full: bool) -> None:
    tty = out.isatty() if hasattr(out, "isatty") else False
    width = shutil.get_terminal_size((_PIPE_WIDTH, 24)).columns if tty else int(
        os.environ.get("COLUMNS") or _PIPE_WIDTH)
    cells = [[c if full else _clip(c, MAX_WRAPPED) for c in map(cell_text, row)] for row in rows]
    lines = _plain_lines(columns, cells, [_numeric(rows, i) for i in range(len(columns))], width) if columns else None
    if lines is None and columns and not fits(columns, cells, width):
        lines = vertical_lines(columns, cells, width, full=full)
        if not full and any(len(v) > max(8, width - max(map(len, columns)) - 3) for r in cells for v in r):
            lines.append("(values cut to the width: --full shows them whole)")
    elif lines is not None:
        if tty:
            lines[0] = f"\x1b[1m{lines[0]}\x1b[0m"  # bold, as rich prints the header
    else:
        from rich.console import Console

        console = Console(file=io.StringIO(), width=width, highlight=False, emoji=False, markup=False,
                          soft_wrap=False, force_terminal=tty, no_color=not tty)
        with console.capture() as captured:
            console.print(rich_table(columns, rows, full=full, width=width))
        # Rich pads every line to the table's width; trailing blanks only get in the way of a pipe.
        lines = [line.rstrip() for line in captured.get().splitlines()]
    out.write("\n".join(lines) + "\n")
    out.write(count(len(rows), "row").join("()") + "\n")


def write_rows(
    out: TextIO, columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table", *, full: bool = False
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
        # Keys are the columns made unique (``SELECT 1 AS a, 2 AS a`` kept only the 2), and a
        # non-finite float is its name as a string: NaN and Infinity are not JSON (jq refuses them).
        keys = _unique(columns)
        json.dump([{k: _finite(v) for k, v in zip(keys, r)} for r in rows], out, ensure_ascii=True, default=str,
                  indent=1, allow_nan=False)
        out.write("\n")
    else:
        _print_table(out, columns, rows, full=full)


def _unique(columns: Sequence[str]) -> list[str]:
    """Column names with repeats suffixed as DuckDB suffixes them (``a``, ``a_1``, ``a_2``)."""
    seen: set[str] = set()
    out = []
    for name in columns:
        key, n = name, 0
        while key in seen:
            n += 1
            key = f"{name}_{n}"
        seen.add(key)
        out.append(key)
    return out


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in lists and structs too) as the string Python names it."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[str(value)]
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value


def to_text(columns: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table") -> str:
    buf = io.StringIO()
    write_rows(buf, columns, rows, fmt)
    return buf.getvalue()
