"""OTLP JSON trace files: spans mapped to runs by the same code as ``looptrace collect``.

The OTel Collector's file exporter (and others) write one OTLP/JSON ``ExportTraceServiceRequest`` per
line; a single object over several lines is read too. Unlike the other importers this one yields
rows rather than ``Trajectory`` values: a trace carries more than a trajectory holds (every span,
model calls with their requests and tokens, timings), and the receiver's rows are the reference, so
both go through ``tracer.ingest.conventions.rows_for_trace`` and give the same rows. Importing twice
adds nothing: spans already stored are skipped by id, and a trace already stored is not mapped again.
Log records read from OTLP JSON log files of the same import (``otlp_logs.py``) are joined to their
spans before mapping, as ``collect`` joins them (``ingest/otlp/events.py``).
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..otlp.conventions import rows_for_trace
from ..otlp.conversations import group_conversations, is_loose_call
from ..otlp.events import JOINED, KEPT, LATE, PlainLog, join, log_rows
from ..otlp.protocol import MalformedRequest, parse_json, spans_of
from ...records.spans import PlainSpan

from .detect import MAX_BYTES
from .errors import TrajectoryFormatError
from .text import decode_document

__all__ = ["FORMAT", "SUFFIXES", "OtlpFile", "OtlpRows", "sniff", "head_matches", "parse"]

FORMAT = "otlp-json"
SUFFIXES = (".json", ".jsonl", ".json.gz", ".jsonl.gz")
_HEAD = re.compile(rb'^\s*\{\s*"resource_?[sS]pans"\s*:')


@dataclass
class OtlpRows:
    rows: dict[str, list[dict[str, Any]]]
    runs_new: int
    runs_present: int
    steps_new: int
    runs_without_steps: int = 0


@dataclass
class OtlpFile:
    source: str
    traces: dict[str, list[PlainSpan]] = field(default_factory=dict)  # trace id -> its spans
    logs: dict[str, list[PlainLog]] = field(default_factory=dict)  # trace id -> its log records

    @property
    def trace_ids(self) -> list[str]:
        return list(self.traces)

    def rows(self, stored: Mapping[str, Mapping[str, str | None]], stored_logs: set[str] | frozenset[str] = frozenset(),
             ) -> OtlpRows:
        """The rows to write, given the span ids already stored (trace id -> span id -> run id) and
        the ids of log records already stored."""
        out: dict[str, list[dict[str, Any]]] = {}
        present: set[str] = set()
        loose = []  # model calls of bare SDK loops, each its own trace: grouped into runs as collect does
        records: list[PlainLog] = []
        status: dict[str, str] = {}
        for trace_id, spans in self.traces.items():
            known = stored.get(trace_id)
            logs = [r for r in self.logs.get(trace_id, ()) if r.log_id not in stored_logs]
            records += logs
            if known:
                present.update(r for r in known.values() if r)
                status.update((r.log_id, LATE) for r in logs)  # its trace was mapped without them
            else:
                spans, used = join(spans, logs)
                status.update((i, JOINED) for i in used)
            if not known and is_loose_call(spans):
                loose.append(spans)
                continue
            for table, rows in rows_for_trace(spans, source=self.source, stored=known).items():
                out.setdefault(table, []).extend(rows)
            for span_id, run_id in (known or {}).items():
                out.setdefault("_runs", []).append({"span_id": span_id, "run_id": run_id})
        for group in group_conversations(loose):
            for table, rows in rows_for_trace(group, source=self.source).items():
                out.setdefault(table, []).extend(rows)
        run_of = {r["span_id"]: r["run_id"] for r in (*out.pop("_runs", ()), *out.get("spans", ()))}
        if records:
            out["log_records"] = log_rows(records, status, run_of, KEPT)
        new = {r["run_id"] for r in out.get("run_records", [])}
        steps = {(r["run_id"], r["step"]) for r in out.get("step_records", [])}
        stepless = len(new - {run_id for run_id, _ in steps})
        return OtlpRows(out, len(new), len(present - new), len(steps), stepless)


def _open(path: Path, size: int) -> bytes:
    if path.name.lower().endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return f.read(size)
    with open(path, "rb") as f:
        return f.read(size)


def sniff(path: Path) -> bool:
    """A file whose JSON starts with ``resourceSpans``: an OTLP JSON trace file."""
    return head_matches(path, _HEAD)


def head_matches(path: Path, head: re.Pattern[bytes]) -> bool:
    """Whether a JSON file (plain or gzipped) of ours begins as ``head`` says: the OTLP containers are
    told apart by their first key (``resourceSpans``, ``resourceLogs``)."""
    if not path.name.lower().endswith(SUFFIXES):
        return False
    try:
        return head.match(_open(path, 4096).lstrip(b"\xef\xbb\xbf")) is not None
    except (OSError, EOFError, zlib.error):
        return False  # unreadable here: the other importers say why


def parse(path: Path) -> OtlpFile:
    """Every span of an OTLP JSON file, by trace; ``TrajectoryFormatError`` names what is wrong."""
    try:
        raw = _open(path, MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise TrajectoryFormatError(f"cannot read the file ({exc})") from exc
    text = decode_document(raw, MAX_BYTES)
    try:
        json.loads(text)
        documents = [(0, text)]  # one object, however it is laid out
    except json.JSONDecodeError:
        documents = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    out = OtlpFile(str(path))
    for line, document in documents:
        try:
            spans = spans_of(parse_json(document))
        except MalformedRequest as exc:
            raise TrajectoryFormatError(f"line {line}: {exc}" if line else str(exc)) from exc
        for s in spans:
            out.traces.setdefault(s.trace_id, []).append(s)
    return out
