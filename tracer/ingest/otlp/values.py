"""Attribute values as the store takes them: the first of several names, a count in range, text, JSON.

Spans from other instrumentations are untrusted: any attribute may hold any type, a count may not fit a
BIGINT, a string may or may not be JSON (GenAI records messages as JSON text), and JSON that Python reads
(NaN, lone surrogate escapes) may be refused by DuckDB and fail a whole segment. These readers turn such
values into what a column holds, or None. Pure functions; the hot path of ``looptrace collect``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ...records.text import clean_text, to_json

__all__: list[str] = []  # private to this package: attributes.py, conventions.py, steps.py and the rest

_INT64 = 1 << 63
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # valid for Python's json, refused by DuckDB's
# JSON columns that tracer.records fills from attributes as they are: checked when the spans are untrusted.
_JSON_COLUMNS = {"tool_call_records": ("args",), "run_records": ("attributes",), "step_records": ("events",),
                 "llm_call_records": ("params", "system", "tools", "messages_append", "response")}


def _first(a: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for k in keys:  # a loop, not next() over a generator: called ~10 times a span on collect's hot path
        value = a.get(k)
        if value is not None:
            return value
    return None


def _int(value: Any) -> int | None:
    """A count for a BIGINT column, or None (not a number, or out of range)."""
    try:
        number = int(value) if value is not None else None
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number is None or -_INT64 <= number < _INT64 else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return clean_text(value) if isinstance(value, (str, bytes)) else to_json(value)


# What a JSON text can start with, after JSON's whitespace (NaN and Infinity are refused below, but
# parsed first). Any other text is returned at once: a tool's plain-text result or a model name would
# otherwise cost json.loads an exception, which was most of a tool span's mapping.
_JSON_START = frozenset('{["-0123456789tfnNI')
_JSON_SPACE = " \t\n\r"


def _loads(value: Any) -> Any:
    """A JSON attribute (GenAI records messages as JSON text); anything else as it is."""
    if not isinstance(value, str) or value[:1] not in _JSON_START and value.lstrip(_JSON_SPACE)[:1] not in _JSON_START:
        return value
    try:
        return json.loads(value, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return value


def _refuse(name: str) -> Any:
    raise ValueError(name)  # NaN and Infinity are not JSON, and DuckDB's JSON type refuses them


_UNPARSED = object()


def _json_text(value: Any, parsed: Any = _UNPARSED) -> str | None:
    """JSON text for a JSON column: a string that already is JSON as written, anything else encoded.
    ``parsed``: ``_loads(value)``, when the caller has it already."""
    if value is None:
        return None
    if isinstance(value, str):
        parsed = _loads(value) if parsed is _UNPARSED else parsed
        if parsed is not value:
            return to_json(parsed) if _SURROGATE_ESCAPE.search(value) else clean_text(value)
    return to_json(value)


def _safe_json(rows: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """``rows`` with every JSON column holding valid JSON: one bad cell would fail its whole segment."""
    for table, columns in _JSON_COLUMNS.items():
        for row in rows.get(table, ()):
            for column in columns:
                if row.get(column) is not None:
                    row[column] = _json_text(row[column])
    return rows
