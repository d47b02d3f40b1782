"""What a receiver counts: requests, spans and log records received, written, dropped, late, lost.

``TraceBuffer`` keeps the counts (it sees every span come and go); ``looptrace collect`` prints them at
the end and writes a ``writer_stats`` row from them (receiver.py).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ReceiverStats"]


@dataclass
class ReceiverStats:
    requests: int = 0
    rejected: int = 0  # requests answered 4xx or 5xx
    spans_received: int = 0
    spans_written: int = 0
    duplicate_spans: int = 0
    late_spans: int = 0
    traces_written: int = 0
    runs_written: int = 0  # runs whose records were written (a run still going counts when its trace is)
    incomplete_traces: int = 0
    write_errors: int = 0  # failed segment writes: retried (I/O), or written again apart (bad data)
    refused_traces: int = 0  # traces whose runs and steps the store refused: kept as bare spans
    lost_spans: int = 0  # spans the store refused even without their runs and steps
    recovered_spans: int = 0  # open spans a crashed receiver left in the journal, taken back at start
    logs_received: int = 0
    logs_written: int = 0
    duplicate_logs: int = 0
    late_logs: int = 0  # records of a trace already written: kept in log_records as 'late'
    recovered_logs: int = 0
    last_error: str | None = None
