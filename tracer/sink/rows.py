"""Redaction of record rows, table by table: the sink's middle stage.

Every text value of every record is redacted, except the columns looptrace fills itself with ids,
hashes and enums (``SAFE_COLUMNS``). JSON columns (attributes, events, resource, arguments, model
messages) go through ``Redactor.value``, which walks JSON text with its keys.

Most batches hold no secret, so one cheap test (``Redactor.may_redact``: substring tests over the
whole batch encoded once) clears them whole; a batch it does not clear is tested column by column,
and only the values of a column that fails are redacted one by one. What was redacted (rule and
count, never the value) in any record of a span is added to that span's row as the attribute
``looptrace.redactions``; where (table, field path, rule; never the value) goes into the manifest
table ``redaction_records``, in the same segment as the records it describes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from itertools import chain
from typing import Any

from ..records.batch import TableData
from ..records.text import to_json
from .redact import Hits, Redactor, summarize

__all__ = ["SAFE_COLUMNS", "redact_tables"]

# Columns whose values looptrace makes itself (ids, hashes, enums): never secrets, never redacted.
SAFE_COLUMNS = frozenset({
    "run_id", "parent_run_id", "trace_id", "span_id", "parent_span_id", "call_id", "base_call_id",
    "tool_call_id", "request_sha", "system_sha", "tools_sha", "kind", "status_code", "status", "stop_reason",
    "error_type", "replay_of", "forked_from", "strategy", "provider", "label", "segment", "host", "live_trace_id",
    "log_id",
})
REDACTIONS = "looptrace.redactions"


def redact_tables(tables: Mapping[str, TableData], redactor: Redactor) -> dict[str, TableData]:
    """``tables`` with secrets replaced, plus the manifest of what was replaced where
    (``redaction_records``); tables without any secret are returned as they came."""
    if not redactor.enabled:
        return dict(tables)
    columns = {t: _columns(d) for t, d in tables.items()}
    candidates = {t: {k: v for k, v in cols.items() if k not in SAFE_COLUMNS} for t, cols in columns.items()}
    if not _may_redact(redactor, chain.from_iterable(c.values() for c in candidates.values())):
        return dict(tables)
    out: dict[str, TableData] = dict(tables)
    by_span: dict[str, Hits] = {}  # what was redacted in the records of each span
    manifest: list[dict[str, Any]] = []
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    for table, cols in columns.items():
        n = _length(cols)
        changed = False
        for name, values in candidates[table].items():
            if not _may_redact(redactor, [values]):
                continue
            hits: list[Hits] = [{} for _ in range(n)]
            cols[name] = [redactor.value(v, hits[i], path=name) if isinstance(v, _REDACTABLE) else v
                          for i, v in enumerate(values)]
            changed = True
            for i, h in enumerate(hits):
                if h:
                    manifest.extend(_manifest_rows(table, cols, i, h, now))
                    span_id = (cols.get("span_id") or [None] * n)[i]
                    if span_id is not None:
                        merged = by_span.setdefault(span_id, {})
                        for where, k in h.items():
                            merged[where] = merged.get(where, 0) + k
        if changed:
            out[table] = cols
    spans = columns.get("spans")
    if by_span and spans is not None and "attributes" in spans:
        spans["attributes"] = [_with_summary(a, by_span[s]) if s in by_span else a
                               for a, s in zip(spans["attributes"], spans["span_id"])]
        out["spans"] = spans
    if manifest:
        out["redaction_records"] = [*(_rows(tables.get("redaction_records"))), *manifest]
    return out


_REDACTABLE = (str, bytes, bytearray, dict, list, tuple)


_SCALARS = frozenset({type(None), bool, int, float, datetime})


def _may_redact(redactor: Redactor, column_lists: Any) -> bool:
    # Column by column, by the handful of types a column holds, so that the loop over each value runs
    # in C: an isinstance test per value was a third of the sink's CPU for a batch of 8,192 spans.
    # Each distinct text is screened once: whether a rule can match depends on the text alone, and
    # a batch repeats many (every span's resource, span names, tool names, resent outputs), so
    # the text encoded, case-folded and scanned shrank by half on the store_write bench's batches.
    texts: dict[str | None, None] = {}  # a dict, not a set: the same order every run
    for values in column_lists:
        kinds = set(map(type, values))
        if not kinds <= _SCALARS | {str}:
            return True  # bytes, a structure or a str subclass: looked at value by value
        if str not in kinds:
            continue
        if kinds <= {str, type(None)}:
            texts.update(dict.fromkeys(values))
        else:
            texts.update(dict.fromkeys(v for v in values if type(v) is str))
    texts.pop(None, None)
    return redactor.may_redact([], filter(None, texts))  # an empty text holds no secret either


def _manifest_rows(table: str, cols: Mapping[str, list[Any]], i: int, hits: Hits, now: datetime
                   ) -> list[dict[str, Any]]:
    def at(column: str) -> Any:
        values = cols.get(column)
        return values[i] if values is not None else None

    step = at("step")
    return [{"run_id": at("run_id"), "step": step if isinstance(step, int) else None, "span_id": at("span_id"),
             "record": table, "field": path, "rule": rule, "n": n, "recorded_at": now}
            for (path, rule), n in sorted(hits.items())]


def _rows(data: TableData | None) -> list[dict[str, Any]]:
    if data is None:
        return []
    if isinstance(data, Mapping):
        return [dict(zip(data, values)) for values in zip(*data.values())]
    return [dict(r) for r in data]


def _columns(data: TableData) -> dict[str, list[Any]]:
    if isinstance(data, Mapping):
        return {k: list(v) for k, v in data.items()}
    keys = dict.fromkeys(chain.from_iterable(data))
    return {k: [row.get(k) for row in data] for k in keys}


def _length(cols: Mapping[str, Sequence[Any]]) -> int:
    return len(next(iter(cols.values()), ()))


def _with_summary(attributes: str | None, hits: Hits) -> str:
    parsed = json.loads(attributes) if attributes else {}
    parsed[REDACTIONS] = to_json(summarize(hits))
    return to_json(parsed)
