"""A catalog writer killed between the commits of one batch (Iceberg has no commit across tables).

A real ``export --catalog`` process is SIGKILLed right after its ``tool_call_records`` append was
committed: steps, tool calls and spans of its runs are in the catalog, their ``run_records`` are
not. Readers must not show those rows, and the next export must copy the runs whole, once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from looptrace.tracer.export.source import open_source
from looptrace.tracer.store.iceberg import CatalogStore

from .conftest import PYTHON, ROOT, python_env, query
from .test_catalog import catalog_env, cli

pytest.importorskip("pyiceberg")
pytestmark = pytest.mark.slow  # two real export processes and an analyze

NAME = "crashtest"


def _raw_count(table: str) -> int:
    tbl = CatalogStore(NAME).table(table)
    return 0 if tbl is None else tbl.scan(selected_fields=("run_id",)).to_arrow().num_rows


def test_a_writer_killed_between_commits_leaves_nothing_seen_and_the_rerun_writes_each_run_once(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = catalog_env(tmp_path / "catalog", NAME)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    killed = subprocess.run([PYTHON, "-m", "tests.catalog_killed_writer", str(demo), NAME, "tool_call_records"],
                            cwd=ROOT, env={**python_env(), **env}, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    # The crash left rows of runs that run_records lacks.
    n_steps = query(demo, "SELECT count(*) FROM step_records")[0][0]
    assert _raw_count("step_records") == n_steps and _raw_count("tool_call_records") > 0
    assert _raw_count("run_records") == 0
    orphans = CatalogStore(NAME).orphan_runs()
    finished = {r[0] for r in query(demo, "SELECT run_id FROM runs WHERE status <> 'incomplete'")}
    assert orphans == finished
    # Readers show none of them.
    with open_source(f"iceberg:{NAME}").reader() as conn:
        for view in ("runs", "steps", "step_records", "tool_call_records", "llm_call_records"):
            assert conn.execute(f"SELECT count(*) FROM {view} WHERE run_id IS NOT NULL").fetchone() == (0,), view
    assert cli("analyze", "--catalog", NAME, "--json", env=env).stdout.strip() == "[]"

    # The next export removes the crashed batch's rows and copies the runs whole: each row once.
    again = cli("export", "--db", str(demo), "--catalog", NAME, env=env).stdout
    assert f"{len(finished)} runs left in part" in again, again
    assert CatalogStore(NAME).orphan_runs() == set()
    with open_source(f"iceberg:{NAME}").reader() as conn:
        for table, key in (("step_records", "run_id, step"), ("tool_call_records", "run_id, step, call_index"),
                           ("spans", "trace_id, span_id"), ("run_records", "run_id, recorded_at")):
            got = conn.execute(f"SELECT count(*), count(DISTINCT ({key})) FROM {table}").fetchone()
            want = query(demo, f"SELECT count(*), count(DISTINCT ({key})) FROM {table} "
                               f"WHERE run_id IN (SELECT run_id FROM runs WHERE status <> 'incomplete')")[0]
            assert got == tuple(want), table
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (len(finished),)
