"""OTLP JSON log files beside their trace files: GenAI events joined to the spans of the same import.

The Collector's file exporter writes traces and logs to separate files (one OTLP/JSON
``ExportLogsServiceRequest`` per line). ``looptrace import`` reads every log file among its paths first
(``LogRecords``), then hands each trace file the records of its traces, which are joined to their spans
before mapping exactly as ``looptrace collect`` joins them (``ingest/otlp/events.py``). Records of no
trace in the import are kept in ``log_records`` as they came (``kept``); a record already stored (by id)
is not stored again.
"""

from __future__ import annotations

import json
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..otlp.events import PlainLog
from ..otlp.logs_protocol import logs_of, parse_logs_json
from ..otlp.protocol import MalformedRequest
from .detect import MAX_BYTES
from .errors import TrajectoryFormatError
from .otlp_json import _open, head_matches
from .text import decode_document

__all__ = ["FORMAT", "LogRecords", "sniff", "parse"]

FORMAT = "otlp-json-logs"
_HEAD = re.compile(rb'^\s*\{\s*"resource_?[lL]ogs"\s*:')


@dataclass
class LogRecords:
    """The log records of an import, by trace (``None``: tied to no trace)."""

    by_trace: dict[str | None, list[PlainLog]] = field(default_factory=dict)
    taken: set[str | None] = field(default_factory=set)  # traces whose records a trace file took

    def add(self, logs: list[PlainLog]) -> None:
        for r in logs:
            self.by_trace.setdefault(r.trace_id, []).append(r)

    def take(self, trace_id: str) -> list[PlainLog]:
        self.taken.add(trace_id)
        return self.by_trace.get(trace_id, [])

    def left(self) -> list[PlainLog]:
        """The records no trace file took: to be kept as they came."""
        return [r for t, logs in self.by_trace.items() if t not in self.taken for r in logs]


def sniff(path: Path) -> bool:
    """A file whose JSON starts with ``resourceLogs``: an OTLP JSON log file."""
    return head_matches(path, _HEAD)


def parse(path: Path) -> list[PlainLog]:
    """Every record of an OTLP JSON log file; ``TrajectoryFormatError`` names what is wrong."""
    try:
        raw = _open(path, MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise TrajectoryFormatError(f"cannot read the file ({exc})") from exc
    text = decode_document(raw, MAX_BYTES)
    try:
        json.loads(text)
        documents = [(0, text)]
    except json.JSONDecodeError:
        documents = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    out: list[PlainLog] = []
    for line, document in documents:
        try:
            logs = logs_of(parse_logs_json(document))
        except MalformedRequest as exc:
            raise TrajectoryFormatError(f"line {line}: {exc}" if line else str(exc)) from exc
        for r in logs:
            r.seq = len(out)
            out.append(r)
    return out
