"""Running the rules over a store: fetch plain rows, diagnose in Python, write ``diagnoses``.

Reading happens on a reader session (no lock held while the rules run); the results are written
in one short transaction that replaces the analysed runs' earlier diagnoses.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from looptrace.tracer.records.actions import NEAR_OBSERVATION_KEY_SQL, PROGRESS_KEY_SQL, call_key
from looptrace.tracer.store import Store
from looptrace.tracer.store.segments import arrow_schema

from .ending import run_end
from .markers import MAY_MARK_SQL, TAIL_STEPS
from .rules import FAILURE_LABELS, Diagnosis, RunView, StepView, diagnose, rank
from .screen import PICKED_ROWS_SQL, cleared, clears, screen
from .thresholds import DEFAULT_THRESHOLDS, Thresholds

if TYPE_CHECKING:
    from looptrace.tracer.export.source import ParquetSource

__all__ = ["RunDiagnoses", "load_runs", "analyze_store", "diagnose_all", "RUNS_SQL", "STEPS_SQL"]

# A run `looptrace collect` shows from a preview of its open trace (docs/schema.md): it has not ended, so
# there is nothing to diagnose yet (it would look like a cap hit or an incomplete run). Skipped: it is
# analysed once its trace is written and the preview replaced.
RUNNING = "running"

# The run facts the rules need; the answer's ends and the recorded attributes (the latest record's)
# carry end markers.
RUNS_SQL = """
SELECT run_id, status, model, error,
       CASE WHEN length(answer) > 1000 THEN left(answer, 500) || chr(10) || right(answer, 500) ELSE answer END,
       a.attributes
FROM runs LEFT JOIN (
    SELECT run_id, CAST(arg_max(attributes, recorded_at) AS VARCHAR) AS attributes FROM run_records GROUP BY run_id
) a USING (run_id) {where} ORDER BY run_id
"""

def _braces(sql: str) -> str:
    return sql.replace("{", "{{").replace("}", "}}")


# One row per action, in order. Observations are compared by a hash that ignores clock readings and
# ids (records/actions.py), never fetched whole: the sink stores both keys with each call (schema
# version 7), and a row stored without them (written by hand, or by a bulk loader that left them out)
# gets them here, from the same patterns in SQL. Only the last steps' texts are fetched, clipped, for
# end markers, and only those that may hold one (``MAY_MARK_SQL``, markers.py).
_STEPS_TEMPLATE = """
SELECT run_id, step, call_index, tool, args, action_key, observation_key, near_key, observation_bytes, is_error,
       error_type, context_tokens, CASE WHEN {may_mark} THEN end_text END AS end_text, tokens, cost_usd
FROM (
    SELECT run_id, step, call_index, tool, CAST(args AS VARCHAR) AS args, action_key,
           coalesce(progress_key, {observation_key}) AS observation_key,
           coalesce(near_key, {near_key}) AS near_key,
           coalesce(observation_bytes, 0) AS observation_bytes, coalesce(is_error, false) AS is_error,
           error_type, context_tokens,
           CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN NULL
                ELSE coalesce(input_tokens, 0) + coalesce(output_tokens, 0) END AS tokens, cost_usd,
           CASE WHEN step > {{last_step}} - {tail} THEN nullif(concat_ws(chr(10),
               left(thought, 500), right(thought, 500), left(observation, 500), right(observation, 500),
               left(CAST(events AS VARCHAR), 2000)), '') END AS end_text
    FROM steps {{where}}
)
""".format(observation_key=_braces(PROGRESS_KEY_SQL),  # keeps {where} and {last_step} for later
           near_key=_braces(NEAR_OBSERVATION_KEY_SQL), tail=TAIL_STEPS,
           may_mark=_braces(MAY_MARK_SQL.format(text="end_text")))
_BY_STEP = "ORDER BY run_id, step, call_index"
_ALL_ROWS = _STEPS_TEMPLATE.replace("{last_step}", "max(step) OVER (PARTITION BY run_id)")
STEPS_SQL = _ALL_ROWS + _BY_STEP
# The screened fetch (screen.py) knows each run's last step: no window, whose sort would carry every
# row's thought, observation and events through it.
_PICKED_ROWS = _STEPS_TEMPLATE.replace("{last_step}", "picked.last_step").format(where=PICKED_ROWS_SQL)
PICKED_STEPS_SQL = _PICKED_ROWS + _BY_STEP
_ROWS_TABLE = "_analyzer_rows"  # a temporary table of the analyzer's own session (``_ordered_rows``)
_STEP_FIELDS = ("step", "call_index", "tool", "args", "action_key", "observation_key", "near_key",
                "observation_bytes", "is_error", "error_type", "context_tokens", "end_text", "tokens", "cost_usd")
# Fields StepView may gain that the query does not fill: their plain defaults. A field with no plain
# default (a default_factory) sends loading through StepView's own __init__.
_OTHER_DEFAULTS = {f.name: f.default for f in dataclasses.fields(StepView)
                   if f.name not in _STEP_FIELDS and f.default is not dataclasses.MISSING}
_FAST = all(f.name in _STEP_FIELDS or f.name in _OTHER_DEFAULTS for f in dataclasses.fields(StepView))

# Rows per Arrow batch while streaming steps, and DuckDB's memory cap for the ordered scan: together
# with one run's StepViews they bound the analyzer's memory, whatever the size of the store.
BATCH_SIZE = 50_000
SORT_MEMORY = "1GB"


@dataclass(frozen=True)
class RunDiagnoses:
    run_id: str
    status: str
    diagnoses: list[Diagnosis]

    @property
    def primary(self) -> Diagnosis | None:
        return self.diagnoses[0] if self.diagnoses else None


def load_runs(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str] | None = None, *,
              batch_size: int = BATCH_SIZE) -> Iterator[RunView]:
    """Each run with its steps, in run_id order, one run at a time.

    Both queries are ordered by run_id, so a run is complete as soon as the step stream passes it:
    only one Arrow batch and the run being assembled are held, never the whole ``steps`` table
    (the old loader kept every StepView of the store, ~800 B a step, before diagnosing any run).
    """
    where, params = ("WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)]) if run_ids else ("", [])
    runs = conn.execute(RUNS_SQL.format(where=where), params).fetchall()
    yield from _merge(runs, _ordered_rows(conn, _ALL_ROWS.format(where=where), params, batch_size))


def _ordered_rows(conn: duckdb.DuckDBPyConnection, sql: str, params: list[Any],
                  batch_size: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``sql`` (a steps query with no order) as Arrow batches in run, step and call order.

    The rows are kept in a temporary table first and sorted from there: the steps view's full outer
    join carries every step's thought and events whichever rows are kept, and at 10,000,000 steps it
    spills past the session's memory cap. Sorting in the same pipeline, under 2 threads, then failed
    to pin a block every time (the sort's and the join's partitions held at once, a thread each); the
    join alone fits, and the sort alone does. The table costs no more CPU at 2,000,000 steps. If the
    join still runs out of memory (longer thoughts than the bench's), it is retried once on one thread,
    for the rest of this session: slower, never a failed analysis."""
    create = f"CREATE OR REPLACE TEMP TABLE {_ROWS_TABLE} AS {sql}"
    try:
        conn.execute(create, params)
    except duckdb.OutOfMemoryException:
        conn.execute("SET threads = 1")
        conn.execute(create, params)
    try:
        yield from conn.sql(f"SELECT * FROM {_ROWS_TABLE} {_BY_STEP}").to_arrow_reader(batch_size)
    finally:
        with suppress(duckdb.Error):  # the session may be closed already when an unfinished stream is dropped
            conn.execute(f"DROP TABLE IF EXISTS {_ROWS_TABLE}")


def _merge(runs: Sequence[tuple[Any, ...]], reader: Iterable[pa.RecordBatch]) -> Iterator[RunView]:
    """Each run of ``runs`` (RUNS_SQL rows) with its steps from ``reader`` (STEPS_SQL), both in run_id order."""
    steps = _step_groups(reader)
    pending: tuple[str, list[StepView]] | None = next(steps, None)
    for run_id, status, model, error, answer, attributes in runs:
        # Steps of run ids the runs view lacks (a run record never written) are skipped, as before.
        while pending is not None and pending[0] < run_id:
            pending = next(steps, None)
        own: list[StepView] = []
        if pending is not None and pending[0] == run_id:
            own = pending[1]
            pending = next(steps, None)
        yield RunView(run_id, status, tuple(own), model, error, answer, attributes)


def _step_groups(reader: Iterable[pa.RecordBatch]) -> Iterator[tuple[str, list[StepView]]]:
    """(run_id, its steps) for consecutive rows of one run; rows with no run_id are dropped."""
    current: str | None = None
    group: list[StepView] = []
    new = object.__new__
    for batch in reader:
        run_ids = batch.column("run_id").to_pylist()
        fields = zip(*(batch.column(name).to_pylist() for name in _STEP_FIELDS))
        for run_id, values in zip(run_ids, fields):
            if run_id != current:
                if current is not None:
                    yield current, group
                current, group = run_id, []
            # StepView's frozen __init__ sets its fields one object.__setattr__ at a time, which
            # was most of the loading time; filling the instance's dict makes an equal value at a
            # third of the cost (tests compare both). STEPS_SQL already coalesced the nullable fields.
            # ``action`` (a cached property every rule reads) is filled here too: computing it on
            # first read took the cached property's lock once per step.
            if _FAST:
                view = new(StepView)
                own = view.__dict__
                own.update(zip(_STEP_FIELDS, values))
                if _OTHER_DEFAULTS:
                    own.update(_OTHER_DEFAULTS)
                tool, key = own["tool"], own["action_key"]
                own["action"] = None if tool is None else key if key is not None else call_key(tool, own["args"])
            else:
                view = StepView(**dict(zip(_STEP_FIELDS, values)))
            group.append(view)
    if current is not None:
        yield current, group


def analyze_store(store: Store | ParquetSource, *, run_ids: Sequence[str] | None = None,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS, write: bool = True,
                  screened: bool = True) -> list[RunDiagnoses]:
    """Diagnose the store's runs (``run_ids``: only those), in run_id order, and replace their diagnoses.
    The whole store goes through the column screen first (screen.py); ``screened=False`` evaluates
    every run in full instead, which gives the same diagnoses (the reference the tests hold it to)."""
    with store.reader(locked_down=False) as conn, _no_collection():
        _bound_memory(conn)
        if screened and not run_ids:
            results = diagnose_all(conn, thresholds)
        else:
            results = [RunDiagnoses(r.run_id, r.status, diagnose(r, thresholds)) for r in load_runs(conn, run_ids)
                       if r.status != RUNNING]
    if write and results:
        _write(store, results)
    return results


def diagnose_all(conn: duckdb.DuckDBPyConnection, t: Thresholds = DEFAULT_THRESHOLDS, *,
                 batch_size: int = BATCH_SIZE) -> list[RunDiagnoses]:
    """Every run of the session's store, screened (screen.py): a run the columns clear of every failure
    rule is judged on how it ended, from its picked rows; the others are fetched whole and diagnosed
    without the rules the screen cleared."""
    runs = [r for r in conn.execute(RUNS_SQL.format(where="")).fetchall() if r[1] != RUNNING]
    facts = screen(conn, t)
    by_columns: dict[str, frozenset[str]] = {}
    picked: tuple[list[Any], ...] = ([], [], [], [], [])
    for run_id, status, model, error, answer, attributes in runs:
        f = facts.get(run_id)
        if f is None:  # no steps: nothing to fetch
            continue
        by_columns[run_id] = clears(RunView(run_id, status, (), model, error, answer, attributes), f, t)
        whole = by_columns[run_id] != FAILURE_LABELS
        for column, value in zip(picked, (run_id, whole, f.first_step, f.last_step, f.last_action_step)):
            column.append(value)
    reader = _ordered_rows(conn, _PICKED_ROWS, list(picked), batch_size)
    results: list[RunDiagnoses] = []
    later: list[str] = []
    for run in _merge(runs, reader):
        columns = by_columns.get(run.run_id, frozenset())
        rules = cleared(run, columns)
        if columns != FAILURE_LABELS:  # fetched whole
            results.append(RunDiagnoses(run.run_id, run.status, diagnose(run, t, cleared=rules)))
        elif rules == FAILURE_LABELS:
            results.append(RunDiagnoses(run.run_id, run.status, rank([], run_end(run))))
        else:  # an end marker names a failure: the rule that reads it needs the whole run
            later.append(run.run_id)
    if later:
        results += [RunDiagnoses(r.run_id, r.status, diagnose(r, t, cleared=cleared(r, by_columns[r.run_id])))
                    for r in load_runs(conn, later)]
        results.sort(key=lambda r: r.run_id)
    return results


@contextmanager
def _no_collection() -> Iterator[None]:
    """The cyclic garbage collector paused while runs are diagnosed: hundreds of thousands of step
    objects are made and dropped, none in a reference cycle (refcounting frees them), and the
    collections their allocations trigger were ~7% of an analysis while freeing nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _bound_memory(conn: duckdb.DuckDBPyConnection) -> None:
    """Let DuckDB's ORDER BY spill to disk instead of holding the whole sorted store in memory."""
    conn.execute(f"SET memory_limit = '{SORT_MEMORY}'")
    conn.execute("SET preserve_insertion_order = false")
    conn.execute("SET temp_directory = ?", [tempfile.gettempdir()])


def _rows(results: Sequence[RunDiagnoses]) -> list[dict[str, Any]]:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    return [
        {"run_id": r.run_id, "label": d.label, "is_primary": d.is_primary, "first_step": d.first_step,
         "last_step": d.last_step, "evidence": json.dumps(d.evidence, default=str),
         "explanation": d.explanation, "analyzed_at": now}
        for r in results for d in r.diagnoses
    ]


# The rows go in as parallel lists unnested in lockstep: DuckDB converts the Python lists itself. Building
# an Arrow table instead made pyarrow import pandas (~0.5 s, a third of a 100k-step analysis).
INSERT_DIAGNOSES_SQL = """
INSERT INTO diagnoses (run_id, label, is_primary, first_step, last_step, evidence, explanation, analyzed_at)
SELECT unnest($run_id::VARCHAR[]), unnest($label::VARCHAR[]), unnest($is_primary::BOOLEAN[]),
       unnest($first_step::INTEGER[]), unnest($last_step::INTEGER[]), unnest($evidence::VARCHAR[]),
       unnest($explanation::VARCHAR[]), unnest($analyzed_at::TIMESTAMP[])
"""


def _write(store: Store | ParquetSource, results: Sequence[RunDiagnoses]) -> None:
    rows = _rows(results)
    ids = [r.run_id for r in results]
    replace = getattr(store, "replace_diagnoses", None)  # an Iceberg catalog: one atomic overwrite
    if replace is not None:
        replace(ids, pa.Table.from_pylist(rows, schema=arrow_schema("diagnoses")))
        return
    columns = {name: [r[name] for r in rows] for name in _DIAGNOSIS_COLUMNS}
    with store.writer() as conn:
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute("DELETE FROM diagnoses WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
            conn.execute(INSERT_DIAGNOSES_SQL, columns)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


_DIAGNOSIS_COLUMNS = ("run_id", "label", "is_primary", "first_step", "last_step", "evidence", "explanation",
                      "analyzed_at")
