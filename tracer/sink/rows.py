"""Redaction of record rows, table by table: the sink's middle stage.

Every text value of every record is redacted, except the columns looptrace fills itself with ids,
hashes and enums (``SAFE_COLUMNS``). JSON columns (attributes, events, resource, arguments, model
messages) go through ``Redactor.value``, which walks JSON text with its keys.

Most batches hold no secret, so one cheap test (``Redactor.may_redact``: substring tests over the
whole batch encoded once) clears them whole; a batch it does not clear is tested column by column,
and only the values of a column that fails are redacted one by one. What was redacted (rule and
count, never the value) in any record of a span is added to that span's row as the attribute
``looptrace.redactions``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

from ..records.batch import TableData
from ..records.text import to_json
from .redact import Redactor, summarize

__all__ = ["SAFE_COLUMNS", "redact_tables"]

# Columns whose values looptrace makes itself (ids, hashes, enums): never secrets, never redacted.
SAFE_COLUMNS = frozenset({
    "run_id", "parent_run_id", "trace_id", "span_id", "parent_span_id", "call_id", "base_call_id",
    "tool_call_id", "request_sha", "system_sha", "tools_sha", "kind", "status_code", "status", "stop_reason",
    "error_type", "replay_of", "forked_from", "strategy", "provider", "label", "segment", "host",
})
REDACTIONS = "looptrace.redactions"


def redact_tables(tables: Mapping[str, TableData], redactor: Redactor) -> dict[str, TableData]:
    """``tables`` with secrets replaced; tables without any are returned as they came."""
    if not redactor.enabled:
        return dict(tables)
    columns = {t: _columns(d) for t, d in tables.items()}
    candidates = {t: {k: v for k, v in cols.items() if k not in SAFE_COLUMNS} for t, cols in columns.items()}
    if not redactor.may_redact([], _texts(chain.from_iterable(c.values() for c in candidates.values()))):
        return dict(tables)
    out: dict[str, TableData] = dict(tables)
    by_span: dict[str, dict[str, int]] = {}  # what was redacted in the records of each span
    for table, cols in columns.items():
        hits: list[dict[str, int]] = [{} for _ in range(_length(cols))]
        changed = False
        for name, values in candidates[table].items():
            if not redactor.may_redact([], _texts([values])):
                continue
            cols[name] = [redactor.value(v, hits[i]) if isinstance(v, str) else v for i, v in enumerate(values)]
            changed = True
        if changed:
            out[table] = cols
            for span_id, h in zip(cols.get("span_id") or (), hits):
                for rule, n in h.items():
                    if span_id is not None:
                        by_span.setdefault(span_id, {})[rule] = by_span.get(span_id, {}).get(rule, 0) + n
    spans = columns.get("spans")
    if by_span and spans is not None and "attributes" in spans:
        spans["attributes"] = [_with_summary(a, by_span[s]) if s in by_span else a
                               for a, s in zip(spans["attributes"], spans["span_id"])]
        out["spans"] = spans
    return out


def _columns(data: TableData) -> dict[str, list[Any]]:
    if isinstance(data, Mapping):
        return {k: list(v) for k, v in data.items()}
    keys = dict.fromkeys(chain.from_iterable(data))
    return {k: [row.get(k) for row in data] for k in keys}


def _length(cols: Mapping[str, Sequence[Any]]) -> int:
    return len(next(iter(cols.values()), ()))


def _texts(column_lists: Any) -> list[str]:
    return [v for values in column_lists for v in values if isinstance(v, str)]


def _with_summary(attributes: str | None, hits: dict[str, int]) -> str:
    parsed = json.loads(attributes) if attributes else {}
    parsed[REDACTIONS] = to_json(summarize(hits))
    return to_json(parsed)
