"""Base tables of the store, as SQL.

Writers never update a row: every table is append-only, so a batch of rows can be written by any
process as a segment file and absorbed later without coordination. Derived facts (a run's status,
its totals) are computed by the views in ``views.py``, never stored twice.
"""

from __future__ import annotations

__all__ = ["TABLES", "RECORD_TABLES", "EXPORT_DROPS", "REDACTION_RECORDS", "RECEIVED_SPANS", "LIVE_TABLES",
           "LIVE_TRACES", "live_table_ddl"]

SCHEMA_MIGRATIONS = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
)"""

SPANS = """
CREATE TABLE spans (
    trace_id       VARCHAR NOT NULL,
    span_id        VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    name           VARCHAR NOT NULL,
    kind           VARCHAR,
    start_time     TIMESTAMP,
    end_time       TIMESTAMP,
    status_code    VARCHAR,
    status_message VARCHAR,
    run_id         VARCHAR,
    attributes     JSON,
    events         JSON,
    resource       JSON,
    scope          VARCHAR
)"""

RUN_RECORDS = """
CREATE TABLE run_records (
    run_id        VARCHAR NOT NULL,
    recorded_at   TIMESTAMP NOT NULL,
    parent_run_id VARCHAR,
    source        VARCHAR,
    agent         VARCHAR,
    task          VARCHAR,
    model         VARCHAR,
    strategy      VARCHAR,
    status        VARCHAR,
    answer        VARCHAR,
    error         VARCHAR,
    started_at    TIMESTAMP,
    ended_at      TIMESTAMP,
    replay_of     VARCHAR,
    forked_from   VARCHAR,
    fork_step     INTEGER,
    trace_id      VARCHAR,
    span_id       VARCHAR,
    pid           INTEGER,
    attributes    JSON
)"""

STEP_RECORDS = """
CREATE TABLE step_records (
    run_id         VARCHAR NOT NULL,
    step           INTEGER NOT NULL,
    started_at     TIMESTAMP,
    ended_at       TIMESTAMP,
    thought        VARCHAR,
    input_tokens   BIGINT,
    output_tokens  BIGINT,
    context_tokens BIGINT,
    cost_usd       DOUBLE,
    events         JSON,
    span_id        VARCHAR
)"""

TOOL_CALL_RECORDS = """
CREATE TABLE tool_call_records (
    run_id            VARCHAR NOT NULL,
    step              INTEGER NOT NULL,
    call_index        INTEGER NOT NULL,
    tool_call_id      VARCHAR,
    tool              VARCHAR,
    args              JSON,
    observation       VARCHAR,
    observation_bytes BIGINT,
    is_error          BOOLEAN,
    error_type        VARCHAR,
    started_at        TIMESTAMP,
    ended_at          TIMESTAMP,
    span_id           VARCHAR
)"""

LLM_CALL_RECORDS = """
CREATE TABLE llm_call_records (
    run_id                VARCHAR,
    step                  INTEGER,
    call_id               VARCHAR NOT NULL,
    base_call_id          VARCHAR,
    provider              VARCHAR,
    model                 VARCHAR,
    response_model        VARCHAR,
    started_at            TIMESTAMP,
    ended_at              TIMESTAMP,
    params                JSON,
    system_sha            VARCHAR,
    system                JSON,
    tools_sha             VARCHAR,
    tools                 JSON,
    messages_keep         INTEGER,
    messages_append       JSON,
    request_sha           VARCHAR,
    response              JSON,
    stop_reason           VARCHAR,
    input_tokens          BIGINT,
    output_tokens         BIGINT,
    cache_read_tokens     BIGINT,
    cache_creation_tokens BIGINT,
    cost_usd              DOUBLE,
    retries               INTEGER,
    error                 VARCHAR,
    span_id               VARCHAR
)"""

DIAGNOSES = """
CREATE TABLE diagnoses (
    run_id      VARCHAR NOT NULL,
    label       VARCHAR NOT NULL,
    is_primary  BOOLEAN NOT NULL,
    first_step  INTEGER,
    last_step   INTEGER,
    evidence    JSON,
    explanation VARCHAR,
    analyzed_at TIMESTAMP
)"""

WRITER_STATS = """
CREATE TABLE writer_stats (
    pid            INTEGER,
    host           VARCHAR,
    recorded_at    TIMESTAMP,
    spans_received BIGINT,
    spans_written  BIGINT,
    spans_dropped  BIGINT,
    write_errors   BIGINT,
    last_error     VARCHAR
)"""

ABSORBED_SEGMENTS = """
CREATE TABLE absorbed_segments (
    name        VARCHAR PRIMARY KEY,
    absorbed_at TIMESTAMP NOT NULL,
    n_rows      BIGINT
)"""

# Schema version 3: spans another exporter (OTLP) lost, per run, recorded by the tracing process at
# shutdown. Not in TABLES, which is what migration 1 creates.
EXPORT_DROPS = """
CREATE TABLE export_drops (
    run_id      VARCHAR,
    exporter    VARCHAR NOT NULL,
    dropped     BIGINT NOT NULL,
    failed      BIGINT NOT NULL,
    recorded_at TIMESTAMP NOT NULL
)"""

# Schema version 5: the redaction manifest. One row per (record, field, rule) where the sink
# replaced a secret: where and by which rule, never the value. Written in the same segment as the
# records it describes. Not in TABLES, which is what migration 1 creates.
REDACTION_RECORDS = """
CREATE TABLE redaction_records (
    run_id      VARCHAR,
    step        INTEGER,
    span_id     VARCHAR,
    record      VARCHAR NOT NULL,
    field       VARCHAR NOT NULL,
    rule        VARCHAR NOT NULL,
    n           BIGINT NOT NULL,
    recorded_at TIMESTAMP NOT NULL
)"""

# Schema version 6: the OTLP receiver's journal. Every span ``looptrace collect`` acknowledges is
# written here (redacted, fsynced) before the 200, as the span arrived: a whole trace is mapped to
# runs and steps only once it ends, so until then this is its only durable copy. A span is open
# while its (trace_id, span_id) is not in ``spans``; the next collect finishes those traces
# (tracer/ingest/otlp/journal.py). Times are the span's own nanoseconds, so nothing is lost in the
# round trip (unsigned, as OTLP's fixed64 is). Not in TABLES, which is what migration 1 creates.
RECEIVED_SPANS = """
CREATE TABLE received_spans (
    trace_id       VARCHAR NOT NULL,
    span_id        VARCHAR NOT NULL,
    parent_span_id VARCHAR,
    name           VARCHAR NOT NULL,
    kind           VARCHAR,
    start_ns       UBIGINT,
    end_ns         UBIGINT,
    status_code    VARCHAR,
    status_message VARCHAR,
    attributes     JSON,
    events         JSON,
    resource       JSON,
    scope          VARCHAR,
    received_at    TIMESTAMP NOT NULL
)"""

# Schema version 10: OTLP log records (``looptrace collect``'s ``/v1/logs`` and LogsService, and
# ``looptrace import`` of OTLP JSON log files). Every record received is kept here once its trace is
# written, whatever it is: a GenAI event tied to a span (its content also fills that span's model or
# tool call: ``status`` 'joined'), a record of no known event or of no trace seen ('kept': here only),
# or one that came after its trace was written ('late': here, under the trace's run, not in its steps).
# ``log_id`` is a hash of the record's content, so a record sent twice is stored once.
LOG_RECORDS = """
CREATE TABLE log_records (
    log_id          VARCHAR NOT NULL,
    trace_id        VARCHAR,
    span_id         VARCHAR,
    run_id          VARCHAR,
    time            TIMESTAMP,
    observed_time   TIMESTAMP,
    event_name      VARCHAR,
    severity_text   VARCHAR,
    severity_number INTEGER,
    body            JSON,
    attributes      JSON,
    resource        JSON,
    scope           VARCHAR,
    status          VARCHAR NOT NULL
)"""

# Schema version 10: the receiver's journal of log records, as ``received_spans`` is of spans: a record
# is open while its ``log_id`` is not in ``log_records``; times are the record's own nanoseconds and
# ``seq`` its order of arrival within its request (records of one span often share a timestamp).
RECEIVED_LOGS = """
CREATE TABLE received_logs (
    log_id          VARCHAR NOT NULL,
    trace_id        VARCHAR,
    span_id         VARCHAR,
    time_ns         UBIGINT,
    observed_ns     UBIGINT,
    event_name      VARCHAR,
    severity_text   VARCHAR,
    severity_number INTEGER,
    body            JSON,
    attributes      JSON,
    resource        JSON,
    scope           VARCHAR,
    seq             BIGINT,
    received_at     TIMESTAMP NOT NULL
)"""

# Schema version 8: previews of traces still open. ``looptrace collect`` derives the runs, steps and
# calls of an open trace so far, about once a second, and writes them as a *revision* of that trace:
# each live table has its record table's columns plus ``live_trace_id`` and ``live_revision`` (the
# wall clock in ns when the preview was derived). ``live_traces`` says which revision of a trace is
# current (``open``), and the trace's final write adds a row with ``open`` false in the same segment as
# its records, so the views show a preview only until the trace is written, and never twice. A
# migration that adds a column to a record table adds it to its live table too.
LIVE_TABLES: dict[str, str] = {
    "run_records": "live_run_records",
    "step_records": "live_step_records",
    "tool_call_records": "live_tool_call_records",
    "llm_call_records": "live_llm_call_records",
}

LIVE_TRACES = """
CREATE TABLE live_traces (
    trace_id VARCHAR NOT NULL,
    revision BIGINT NOT NULL,
    open     BOOLEAN NOT NULL
)"""


def live_table_ddl(table: str) -> str:
    """The live table of record table ``table``: its columns as they are now, then the two tags."""
    return (f"CREATE TABLE {LIVE_TABLES[table]} AS SELECT *, CAST(NULL AS VARCHAR) AS live_trace_id, "
            f"CAST(NULL AS BIGINT) AS live_revision FROM {table} LIMIT 0")


TABLES: dict[str, str] = {
    "spans": SPANS,
    "run_records": RUN_RECORDS,
    "step_records": STEP_RECORDS,
    "tool_call_records": TOOL_CALL_RECORDS,
    "llm_call_records": LLM_CALL_RECORDS,
    "diagnoses": DIAGNOSES,
    "writer_stats": WRITER_STATS,
    "absorbed_segments": ABSORBED_SEGMENTS,
}

# The tables a segment file may carry rows for.
RECORD_TABLES: tuple[str, ...] = (
    "spans",
    "run_records",
    "step_records",
    "tool_call_records",
    "llm_call_records",
    "diagnoses",
    "writer_stats",
    "export_drops",
    "redaction_records",
    "received_spans",
    "log_records",
    "received_logs",
    "live_traces",
    *LIVE_TABLES.values(),
)
