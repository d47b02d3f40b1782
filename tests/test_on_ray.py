"""What a ``--ray`` command does that needs no cluster: the order it submits partitions in, and a worker
taking its driver's description of the store's tables instead of migrating (replay/on_ray.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from looptrace.replay.on_ray import _largest_first


def _file(path: Path, size: int) -> str:
    path.write_bytes(b"x" * size)
    return str(path)


def test_partitions_go_largest_first_by_their_files_sizes(tmp_path: Path) -> None:
    small = {"run_records": [_file(tmp_path / "r1", 10)], "step_records": [_file(tmp_path / "s1", 100)]}
    large = {"run_records": [_file(tmp_path / "r2", 10)],
             "step_records": [_file(tmp_path / "s2", 150), _file(tmp_path / "s3", 150)]}
    middle = {"run_records": [_file(tmp_path / "r3", 200)]}
    unseen = {"run_records": [str(tmp_path / "gone")]}  # not visible from the driver: last, not an error
    assert _largest_first([small, unseen, middle, large]) == [large, middle, small, unseen]


_WORKER = """
import json, sys
from looptrace.tracer.store import parquet_views

def refuse(conn):
    raise AssertionError("migrated")

parquet_views.migrate = refuse  # the worker must not migrate: it was given the description
parquet_views.use_described(json.loads(sys.stdin.read()))
print(json.dumps(parquet_views.table_columns("run_records")))
"""


def test_a_worker_uses_its_drivers_table_types_and_does_not_migrate() -> None:
    from looptrace.tracer.store.parquet_views import described_tables, table_columns

    described = described_tables()
    assert "run_records" in described and "step_records" in described
    described["run_records"] = (("run_id", "VARCHAR"), ("given", "BIGINT"))  # what the driver said, not a migration
    done = subprocess.run([sys.executable, "-c", _WORKER], input=json.dumps(described), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["run_id", "VARCHAR"], ["given", "BIGINT"]]
    assert ("given", "BIGINT") not in table_columns("run_records")  # this process's own is untouched


def test_the_warm_up_imports_the_module_of_the_task_function() -> None:
    from looptrace.replay.on_ray import ANALYSIS_MODULE
    from looptrace.replay.partitioned import analyze_partition

    assert ANALYSIS_MODULE == analyze_partition.__module__


def test_an_address_where_nothing_answers_is_said_at_once_not_retried_for_minutes() -> None:
    import socket
    import time

    import pytest

    pytest.importorskip("ray")
    from looptrace.replay.on_ray import connect
    from looptrace.tracer.store.iceberg import CatalogError

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there now
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(CatalogError, match=rf"--ray 127.0.0.1:{port}: no Ray cluster found at 127.0.0.1:{port} "
                                           r"\(nothing answers there: Connection refused\)"):
        connect(f"127.0.0.1:{port}")
    assert time.monotonic() - started < 60  # Ray alone was still trying after 120 s (it makes 20 tries of ~40 s)
