"""The receiver's journal of log records: ``received_spans``' twin for ``/v1/logs`` (see ``journal.py``).

A log record of an open trace waits, like its spans, for the trace to be written; until then it is only
in memory, so it is written to ``received_logs`` (through the sink: redacted, one fsynced segment)
before the request is answered. It is *open* while its ``log_id`` is not in ``log_records``: writing its
trace writes its ``log_records`` row in the same segment, which closes it. A receiver started after a
crash reads the open records back with the open spans and finishes their traces as usual.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import duckdb

from ...records.text import to_json
from .events import PlainLog

__all__ = ["LOG_JOURNAL", "log_journal_rows", "logs_of_rows", "read_open_logs", "PRUNE_LOGS_SQL"]

LOG_JOURNAL = "received_logs"

# Records journaled and not yet in `log_records`, once each, in their order of arrival.
OPEN_LOGS_SQL = """
SELECT r.* EXCLUDE (received_at)
FROM received_logs r ANTI JOIN log_records l USING (log_id)
QUALIFY row_number() OVER (PARTITION BY r.log_id ORDER BY r.received_at) = 1
ORDER BY r.received_at, r.seq
"""

# When each trace with open records last received one (its age, with its spans', see journal.py).
OPEN_LOG_TRACES_SQL = """
SELECT r.trace_id, max(r.received_at)
FROM received_logs r ANTI JOIN log_records l USING (log_id)
WHERE r.trace_id IS NOT NULL
GROUP BY r.trace_id
"""

# Ids of records written lately (journaled since ?): a client retrying after a crash adds nothing twice.
WRITTEN_LOGS_SQL = """
SELECT DISTINCT l.log_id
FROM log_records l SEMI JOIN (SELECT log_id FROM received_logs WHERE received_at >= ?) r USING (log_id)
LIMIT ?
"""

# Closed journal rows received before ? (journal.prune runs it with the spans' own).
PRUNE_LOGS_SQL = """
DELETE FROM received_logs r
WHERE r.received_at < ? AND EXISTS (SELECT 1 FROM log_records l WHERE l.log_id = r.log_id)
"""


def log_journal_rows(logs: Sequence[PlainLog], received_at: datetime) -> dict[str, list[Any]]:
    """``logs`` as columns of ``received_logs``: every field kept, so ``logs_of_rows`` gives them back."""
    return {
        "log_id": [r.log_id for r in logs],
        "trace_id": [r.trace_id for r in logs],
        "span_id": [r.span_id for r in logs],
        "time_ns": [r.time_ns for r in logs],
        "observed_ns": [r.observed_ns for r in logs],
        "event_name": [r.event_name for r in logs],
        "severity_text": [r.severity_text for r in logs],
        "severity_number": [r.severity_number for r in logs],
        "body": [to_json(r.body) if r.body is not None else None for r in logs],
        "attributes": [to_json(dict(r.attributes)) if r.attributes else None for r in logs],
        "resource": [to_json(dict(r.resource)) if r.resource else None for r in logs],
        "scope": [r.scope for r in logs],
        "seq": [r.seq for r in logs],
        "received_at": [received_at] * len(logs),
    }


def _loads(text: str | None) -> Any:
    return json.loads(text) if text else None


def logs_of_rows(rows: Iterable[Sequence[Any]]) -> list[PlainLog]:
    """Rows of ``OPEN_LOGS_SQL`` (the journal's columns but ``received_at``) as records again."""
    return [PlainLog(log_id=r[0], trace_id=r[1], span_id=r[2], time_ns=r[3], observed_ns=r[4], event_name=r[5],
                     severity_text=r[6], severity_number=r[7], body=_loads(r[8]), attributes=_loads(r[9]) or {},
                     resource=_loads(r[10]) or {}, scope=r[11], seq=i)
            for i, r in enumerate(rows)]


def read_open_logs(conn: duckdb.DuckDBPyConnection, since: datetime,
                   limit: int) -> tuple[list[PlainLog], dict[str, datetime], list[str]]:
    """(open records, when each of their traces last received one, ids of records written lately)."""
    logs = logs_of_rows(conn.execute(OPEN_LOGS_SQL).fetchall())
    last = {t: at for t, at in conn.execute(OPEN_LOG_TRACES_SQL).fetchall()} if logs else {}
    written = [r[0] for r in conn.execute(WRITTEN_LOGS_SQL, [since, limit]).fetchall()]
    return logs, last, written
