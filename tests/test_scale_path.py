"""The scale path, end to end on one machine (docs/scale.md).

Two agent hosts trace over OTLP only (``Tracing(db=None, otlp_endpoint=...)``, no store in the
agent process) into ``looptrace collect``; the store is analysed, exported to Parquet and analysed
again from the export, and the two analyses must agree run by run. The store must then open in the
plain DuckDB client, read-only, as the DuckDB CLI and Harlequin open it. Everything runs as real
processes through the real CLI, once per module: the tests below read what that one chain left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import pytest

from looptrace.loop.scenarios import SCENARIOS
from looptrace.tracer.export import open_source

from .conftest import PYTHON, ROOT, python_env, query

# One worker builds this module's set-up once (tests/README.md: shared set-ups under xdist).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("scale_path")]

HOSTS = (("healthy", "stagnation"), ("max-iters", "hallucinated-tools"))
EXPECTED_STATUS = {s.name: s.expect for s in SCENARIOS}
# What the analyzer concludes for each scripted scenario: (primary, secondary labels).
EXPECTED_LABELS = {
    "healthy": ("ok", []),
    "stagnation": ("stagnation", []),
    "max-iters": ("cap_hit", []),
    "hallucinated-tools": ("hallucinated_tool", ["cap_hit"]),
}
# Seconds per process of the chain: generous, since the agent hosts import everything cold; 30 s was
# too short on a shared 2-core machine (load 14), where one host took longer than that.
TIMEOUT = 120


@dataclass
class Chain:
    store: Path
    parquet: Path
    collect_out: str
    runs: dict[str, tuple[str, str]]  # scenario -> (run_id, status) as the agent process saw it
    over_store: list[dict[str, Any]]  # `looptrace analyze --json` over the store
    over_parquet: list[dict[str, Any]]  # ... and over the Parquet export


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], cwd=ROOT, env=python_env(), capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, f"looptrace {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done


def _by_run(analysis: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["run_id"]: r for r in analysis}


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Chain:
    tmp = tmp_path_factory.mktemp("scale")
    store, parquet = tmp / "traces.duckdb", tmp / "traces-parquet"
    collect = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(store), "--port", "0",
                                "--grpc-port", "off", "--settle", "0"], cwd=ROOT, env=python_env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert collect.stdout is not None
        line = collect.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line + (collect.stderr.read() if collect.stderr else "")
        port = urlsplit(line.split("listening on ", 1)[1].split(",", 1)[0]).port
        endpoint = f"http://127.0.0.1:{port}"  # the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT would give it
        hosts = [subprocess.Popen([PYTHON, "-m", "tests.scale_agent", endpoint, *names], cwd=ROOT,
                                  env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for names in HOSTS]
        runs: dict[str, tuple[str, str]] = {}
        for host in hosts:
            out, err = host.communicate(timeout=TIMEOUT)
            assert host.returncode == 0 and out.endswith("flushed\n"), out + err
            for name, run_id, status, *_ in (ln.split() for ln in out.splitlines()[:-1]):
                runs[name] = (run_id, status)
    finally:
        collect.send_signal(signal.SIGINT)  # as Ctrl-C: buffered traces are written, then the store compacted
        try:
            collect_out, collect_err = collect.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            collect.kill()
            raise
    assert collect.returncode == 0, collect_out + collect_err
    over_store = json.loads(_cli("analyze", "--db", str(store), "--json").stdout)
    _cli("export", "--db", str(store), "--parquet", str(parquet))
    over_parquet = json.loads(_cli("analyze", "--db", str(parquet), "--json").stdout)
    return Chain(store, parquet, collect_out, runs, over_store, over_parquet)


def test_every_run_arrives_through_collect_with_its_status(chain: Chain) -> None:
    assert sorted(chain.runs) == sorted(n for names in HOSTS for n in names)
    assert {n: status for n, (_, status) in chain.runs.items()} == {n: EXPECTED_STATUS[n] for n in chain.runs}
    stored = {r[0]: r[1:] for r in query(chain.store, "SELECT run_id, agent, source, status, n_steps FROM runs")}
    assert stored == {run_id: (f"scale-{n}", "looptrace", status, stored[run_id][3])
                      for n, (run_id, status) in chain.runs.items()}
    assert all(n_steps > 0 for *_, n_steps in stored.values())
    # The agents' steps arrived whole: no span was lost on the way.
    assert query(chain.store, "SELECT sum(spans_dropped), sum(write_errors) FROM writer_stats") == [(0, 0)]
    assert query(chain.store, "SELECT count(*) FROM spans WHERE run_id IS NULL") == [(0,)]


def test_the_parquet_export_gives_the_same_diagnoses_as_the_store(chain: Chain) -> None:
    def key(analysis: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
        return {(r["run_id"], d["label"], d["is_primary"], d["first_step"], d["last_step"])
                for r in analysis for d in r["diagnoses"]}

    assert {r["run_id"] for r in chain.over_store} == {run_id for run_id, _ in chain.runs.values()}
    assert key(chain.over_parquet) == key(chain.over_store)
    assert _by_run(chain.over_parquet) == _by_run(chain.over_store)  # statuses, explanations, evidence too
    # And what the store kept of its own analysis is what the export carries.
    sql = "SELECT run_id, label, is_primary, first_step, last_step FROM diagnoses ORDER BY ALL"
    with open_source(chain.parquet).reader() as conn:
        exported = conn.execute(sql).fetchall()
    assert exported == query(chain.store, sql)
    assert len(query(chain.store, sql)) == len(key(chain.over_store))


def test_each_scenario_gets_the_diagnosis_of_its_failure(chain: Chain) -> None:
    analysis = _by_run(chain.over_parquet)
    for name, (run_id, status) in chain.runs.items():
        diagnoses = analysis[run_id]["diagnoses"]
        primary = [d for d in diagnoses if d["is_primary"]]
        assert len(primary) == 1 and diagnoses[0] is primary[0], (name, diagnoses)
        got = (primary[0]["label"], [d["label"] for d in diagnoses[1:]])
        assert got == EXPECTED_LABELS[name], name
        assert analysis[run_id]["status"] == status
        assert primary[0]["first_step"] is not None and primary[0]["first_step"] <= primary[0]["last_step"]


def test_the_compacted_store_opens_read_only_in_plain_duckdb(chain: Chain) -> None:
    _cli("compact", "--db", str(chain.store))
    # What the DuckDB CLI (`duckdb -readonly`) and Harlequin (`harlequin -r`) do: open the file itself.
    with duckdb.connect(str(chain.store), read_only=True) as conn:
        runs = dict(conn.sql("SELECT run_id, status FROM runs").fetchall())
        primary = conn.sql("SELECT count(*) FROM diagnoses WHERE is_primary").fetchall()
    assert runs == {run_id: status for run_id, status in chain.runs.values()}
    assert primary == [(len(chain.runs),)]


# `make test` installs the DuckDB shell from its package (duckdb-cli, in the test extra) into the
# virtualenv, whose bin/ need not be on PATH; elsewhere a `duckdb` on PATH serves.
_VENV_BIN = str(Path(PYTHON).parent)
DUCKDB_CLI = shutil.which("duckdb", path=os.pathsep.join([_VENV_BIN, os.environ.get("PATH", "")]))


def _older_cli() -> str:
    """Why the installed duckdb-cli cannot read this DuckDB's files (it is older), or "" if it can."""
    try:
        cli = version("duckdb-cli")
    except PackageNotFoundError:
        return ""
    if _major_minor(cli) >= _major_minor(duckdb.__version__):
        return ""
    return (f"duckdb-cli {cli} (the newest on the package index) is older than duckdb {duckdb.__version__}, "
            "which wrote the store: it refuses the file's storage version (docs/scale.md says to use a "
            "DuckDB at least as new as looptrace's)")


def _major_minor(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


@pytest.mark.skipif(DUCKDB_CLI is None, reason="no duckdb CLI here: `make test` installs it (duckdb-cli)")
def test_the_duckdb_cli_reads_the_store(chain: Chain) -> None:
    assert DUCKDB_CLI is not None
    _cli("compact", "--db", str(chain.store))
    sql = "SELECT count(*) AS n FROM runs"
    done = subprocess.run([DUCKDB_CLI, "-readonly", "-csv", str(chain.store), sql], capture_output=True,
                          text=True, timeout=TIMEOUT)
    older = _older_cli()
    if older:
        # Strict in effect: exactly the known refusal, or the test fails (a CLI that reads the file, or
        # fails another way, needs looking at). Not a mark: a broken fixture must fail, not xfail.
        assert done.returncode != 0 and "created with a newer version of DuckDB" in done.stderr, done
        pytest.xfail(older)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["n", str(len(chain.runs))]


def test_collect_summary_counts_looptrace_traces(chain: Chain) -> None:
    assert f"spans written in {len(chain.runs)} traces (0 incomplete" in chain.collect_out


def test_the_viewer_reads_the_parquet_export(chain: Chain) -> None:
    from looptrace.viewer.app import ViewerApp

    with ViewerApp(chain.parquet, refresh_seconds=None).store.reader() as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchall() == [(len(chain.runs),)]
