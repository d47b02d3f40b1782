"""Running the rules over a store: fetch plain rows, diagnose in Python, write ``diagnoses``.

Reading happens on a reader session (no lock held while the rules run); the results are written
in one short transaction that replaces the analysed runs' earlier diagnoses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from looptrace.tracer.records.actions import NEAR_OBSERVATION_KEY_SQL, PROGRESS_KEY_SQL
from looptrace.tracer.store import Store
from looptrace.tracer.store.segments import arrow_schema

from .markers import TAIL_STEPS
from .rules import Diagnosis, RunView, StepView, diagnose
from .thresholds import DEFAULT_THRESHOLDS, Thresholds

if TYPE_CHECKING:
    from looptrace.tracer.export.source import ParquetSource

__all__ = ["RunDiagnoses", "load_runs", "analyze_store", "RUNS_SQL", "STEPS_SQL"]

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

# One row per action, in order. Observations are compared by a hash that ignores clock readings and
# ids (records/actions.py), never fetched whole; only the last steps' texts are fetched, clipped, for
# end markers (markers.py).
STEPS_SQL = """
SELECT run_id, step, call_index, tool, CAST(args AS VARCHAR) AS args, action_key,
       {observation_key} AS observation_key, {near_key} AS near_key,
       observation_bytes, is_error, error_type, context_tokens,
       CASE WHEN step > max(step) OVER (PARTITION BY run_id) - {tail} THEN concat_ws(chr(10),
           left(thought, 500), right(thought, 500), left(observation, 500), right(observation, 500),
           left(CAST(events AS VARCHAR), 2000)) END AS end_text
FROM steps {{where}}
ORDER BY run_id, step, call_index
""".format(observation_key=PROGRESS_KEY_SQL.replace("{", "{{").replace("}", "}}"),  # keeps {where} for later
           near_key=NEAR_OBSERVATION_KEY_SQL.replace("{", "{{").replace("}", "}}"), tail=TAIL_STEPS)


@dataclass(frozen=True)
class RunDiagnoses:
    run_id: str
    status: str
    diagnoses: list[Diagnosis]

    @property
    def primary(self) -> Diagnosis | None:
        return self.diagnoses[0] if self.diagnoses else None


def load_runs(conn: duckdb.DuckDBPyConnection, run_ids: Sequence[str] | None = None) -> Iterator[RunView]:
    where, params = ("WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [list(run_ids)]) if run_ids else ("", [])
    runs = conn.execute(RUNS_SQL.format(where=where), params).fetchall()
    steps: dict[str, list[StepView]] = {}
    reader = conn.sql(STEPS_SQL.format(where=where), params=params).to_arrow_reader(batch_size=100_000)
    for batch in reader:
        cols = batch.to_pydict()
        for i in range(batch.num_rows):
            steps.setdefault(cols["run_id"][i], []).append(StepView(
                step=cols["step"][i], call_index=cols["call_index"][i], tool=cols["tool"][i], args=cols["args"][i],
                action_key=cols["action_key"][i],
                observation_key=cols["observation_key"][i], observation_bytes=cols["observation_bytes"][i] or 0,
                is_error=bool(cols["is_error"][i]), error_type=cols["error_type"][i],
                context_tokens=cols["context_tokens"][i], end_text=cols["end_text"][i] or None,
                near_key=cols["near_key"][i],
            ))
    for run_id, status, model, error, answer, attributes in runs:
        yield RunView(run_id, status, tuple(steps.get(run_id, ())), model, error, answer, attributes)


def analyze_store(store: Store | ParquetSource, *, run_ids: Sequence[str] | None = None,
                  thresholds: Thresholds = DEFAULT_THRESHOLDS, write: bool = True) -> list[RunDiagnoses]:
    with store.reader(locked_down=False) as conn:
        results = [RunDiagnoses(r.run_id, r.status, diagnose(r, thresholds)) for r in load_runs(conn, run_ids)]
    if write and results:
        _write(store, results)
    return results


def _rows(results: Sequence[RunDiagnoses]) -> list[dict[str, Any]]:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    return [
        {"run_id": r.run_id, "label": d.label, "is_primary": d.is_primary, "first_step": d.first_step,
         "last_step": d.last_step, "evidence": json.dumps(d.evidence, default=str),
         "explanation": d.explanation, "analyzed_at": now}
        for r in results for d in r.diagnoses
    ]


def _write(store: Store | ParquetSource, results: Sequence[RunDiagnoses]) -> None:
    data = pa.Table.from_pylist(_rows(results), schema=arrow_schema("diagnoses"))  # noqa: F841 - read by SQL
    ids = [r.run_id for r in results]
    with store.writer() as conn:
        conn.execute("BEGIN TRANSACTION")
        try:
            conn.execute("DELETE FROM diagnoses WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids])
            conn.execute("INSERT INTO diagnoses BY NAME SELECT * FROM data")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
