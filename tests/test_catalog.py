"""The Iceberg catalog backend: a real pyiceberg SQL catalog, on SQLite under the test's folder or in
a database of its own on a real PostgreSQL server (``conftest.postgres``: what a team shares).

The demo's store (real loop, real SDK) is copied into a catalog by ``looptrace export --catalog``,
and every documented view must then give the same rows over the catalog as over the DuckDB file:
the same SQL over both backends. Exporting again adds nothing. The sink writes into a catalog the
way it writes segments, and the commands say which extra they need when pyiceberg is missing.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from looptrace.tracer.export.source import open_source
from looptrace.tracer.store.iceberg import CatalogStore
from looptrace.tracer.store.views import VIEW_NAMES

from .conftest import PYTHON, ROOT, python_env, query

pytest.importorskip("pyiceberg")

NAME = "lttest"  # pyiceberg reads "_" in a variable's name as "-": a name without one


def catalog_env(folder: Path, name: str = NAME, uri: str | None = None) -> dict[str, str]:
    """A SQL catalog (SQLite under ``folder``, or the database at ``uri``) with its warehouse under
    ``folder``, configured by environment variables, pyiceberg's way."""
    folder.mkdir(parents=True, exist_ok=True)
    key = name.upper()
    return {f"PYICEBERG_CATALOG__{key}__URI": uri or f"sqlite:///{folder / 'catalog.db'}",
            f"PYICEBERG_CATALOG__{key}__WAREHOUSE": (folder / "warehouse").as_uri(),
            "XDG_STATE_HOME": str(folder / "state")}  # a catalog collect's default journal, not in HOME


@pytest.fixture(params=["sqlite", "postgres"])
def catalog_uri(request: pytest.FixtureRequest) -> str | None:
    """The catalog database of a test run on both backends: None for SQLite (a file under the test's
    folder), else a new database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("postgres").create_database(f"catalog_{uuid.uuid4().hex[:12]}")


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_uri: str | None) -> dict[str, str]:
    """An empty catalog named NAME for this test, on each backend."""
    env = catalog_env(tmp_path / "catalog", uri=catalog_uri)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.fixture
def sqlite_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An empty SQLite catalog named NAME, for a slow test whose subject is not the catalog's database."""
    env = catalog_env(tmp_path / "catalog")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.fixture(scope="module")
def exported(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], str, str]:
    """The demo's store exported into a catalog named "exported", twice: (env, first, second output)."""
    env = catalog_env(tmp_path_factory.mktemp("exported"), "exported")
    first = cli("export", "--db", str(demo), "--catalog", "exported", env=env).stdout
    second = cli("export", "--db", str(demo), "--catalog", "exported", env=env).stdout
    return env, first, second


@pytest.fixture
def exported_env(exported: tuple[dict[str, str], str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in exported[0].items():
        monkeypatch.setenv(k, v)
    return exported[0]


def cli(*args: str, env: dict[str, str] | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], cwd=ROOT, env={**python_env(), **(env or {})},
                          capture_output=True, text=True, timeout=300)
    if ok:
        assert done.returncode == 0, f"looptrace {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done


# Every column of every view as text, rows sorted whole. Sums of doubles are rounded: their last
# digit depends on the order DuckDB adds them in, which differs between a file and Parquet scans.
def _all_rows(conn, view: str) -> list[tuple[str, ...]]:  # noqa: ANN001 - a DuckDB connection
    columns = conn.execute(f"DESCRIBE {view}").fetchall()
    select = ", ".join(f'CAST(round("{c}", 9) AS VARCHAR)' if kind == "DOUBLE" else f'CAST("{c}" AS VARCHAR)'
                       for c, kind, *_ in columns)
    return conn.execute(f"SELECT {select} FROM {view} ORDER BY ALL").fetchall()


def test_export_copies_the_store_and_every_view_reads_the_same(
    demo: Path, exported: tuple[dict[str, str], str, str], exported_env: dict[str, str]
) -> None:
    _, first, again = exported
    n_runs = query(demo, "SELECT count(*) FROM runs WHERE status <> 'incomplete'")[0][0]
    assert n_runs > 0 and f"exported {n_runs} runs" in first, first
    with open_source(demo).reader() as store, open_source("iceberg:exported").reader() as cat:
        for view in (*VIEW_NAMES, "diagnoses"):
            assert _all_rows(cat, view) == _all_rows(store, view), view
        assert cat.execute("SELECT count(*) FROM steps").fetchone()[0] > 0
    # Exporting again added nothing: same runs, same rows.
    assert "exported 0 runs (0 rows)" in again and f"{n_runs} runs already there" in again, again
    with open_source("iceberg:exported").reader() as cat:
        assert cat.execute("SELECT count(*), count(DISTINCT run_id) FROM run_records").fetchone() == \
            tuple(query(demo, "SELECT count(*), count(DISTINCT run_id) FROM run_records")[0])
        assert cat.execute("SELECT count(*) FROM step_records").fetchone()[0] == \
            query(demo, "SELECT count(*) FROM step_records")[0][0]


def test_all_rows_of_a_run_share_one_partition(demo: Path, exported_env: dict[str, str]) -> None:
    parts = CatalogStore("exported").partitions()
    runs_in: dict[str, set[object]] = {}
    from looptrace.tracer.store.iceberg.session import open_session

    for key, tables in parts.items():
        conn = open_session(tables)
        try:
            for table in ("run_records", "step_records", "tool_call_records", "llm_call_records"):
                for (run_id,) in conn.execute(f"SELECT DISTINCT run_id FROM {table} WHERE run_id IS NOT NULL").fetchall():
                    runs_in.setdefault(run_id, set()).add(key)
        finally:
            conn.close()
    assert len(runs_in) == query(demo, "SELECT count(*) FROM runs WHERE status <> 'incomplete'")[0][0]
    assert all(len(keys) == 1 for keys in runs_in.values()), runs_in
    assert len(parts) > 1  # the demo's runs spread over several buckets


def test_sql_answers_the_documented_views_over_a_catalog(demo: Path, exported_env: dict[str, str]) -> None:
    sql = "SELECT status, count(*) AS n FROM runs GROUP BY status ORDER BY status"
    over_catalog = cli("sql", "--catalog", "exported", "--format", "csv", sql, env=exported_env).stdout
    over_store = cli("sql", "--db", str(demo), "--format", "csv", sql).stdout
    assert over_catalog == over_store and "ok," in over_catalog
    # Read-only: user SQL cannot write next to the warehouse or read other files.
    refused = cli("sql", "--catalog", "exported", "COPY (SELECT 1) TO 'x.csv'", env=exported_env, ok=False)
    assert refused.returncode == 1 and "error:" in refused.stderr


def test_the_sink_appends_to_a_catalog(catalog: dict[str, str]) -> None:
    from looptrace.tracer.sink import Sink

    sink = Sink(f"iceberg:{NAME}")
    rows = {"run_records": [{"run_id": "r1", "recorded_at": _ts(), "agent": "a", "status": "ok", "ended_at": _ts(),
                             "task": "token sk-ant-api03-" + "x" * 90}],
            "step_records": [{"run_id": "r1", "step": 1, "thought": "t"}],
            "tool_call_records": [{"run_id": "r1", "step": 1, "call_index": 0, "tool": "read", "args": '{"p": 1}'}]}
    assert sink.write(rows) is not None
    assert sink.write({"step_records": []}) is None
    with open_source(f"iceberg:{NAME}").reader() as conn:
        assert conn.execute("SELECT run_id, status, n_steps FROM runs").fetchall() == [("r1", "ok", 1)]
        assert conn.execute("SELECT action_key IS NOT NULL FROM steps").fetchall() == [(True,)]  # derived by the sink
        task = conn.execute("SELECT task FROM runs").fetchone()[0]
        assert "x" * 90 not in task  # redacted on the way in, as into a DuckDB store
        assert conn.execute("SELECT count(*) FROM redactions").fetchone()[0] >= 1


def test_a_catalog_made_before_a_migration_gets_its_new_column(catalog: dict[str, str]) -> None:
    """A catalog whose tables an older looptrace made (here: no ``messages_drop``, schema 9) is given
    the column by the next writer; older rows read it as NULL, new rows keep their value."""
    from looptrace.tracer.sink import Sink

    store = CatalogStore(NAME)
    old = store.create_tables()["llm_call_records"]
    with old.update_schema() as update:
        update.delete_column("messages_drop")
    assert "messages_drop" not in {f.name for f in store.table("llm_call_records").schema().fields}
    sink = Sink(f"iceberg:{NAME}")
    call = {"run_id": "r1", "step": 1, "call_id": "c1", "messages_keep": 0, "messages_append": "[]"}
    run = {"run_id": "r1", "recorded_at": _ts(), "agent": "a", "status": "ok", "ended_at": _ts()}
    assert sink.write({"run_records": [run], "llm_call_records": [{**call, "call_id": "c1"}]}) is not None
    assert sink.write({"run_records": [{**run, "run_id": "r2"}],
                       "llm_call_records": [{**call, "run_id": "r2", "call_id": "c2", "messages_drop": 2}]}) is not None
    with open_source(f"iceberg:{NAME}").reader() as conn:
        assert conn.execute("SELECT call_id, messages_drop FROM llm_call_records ORDER BY 1").fetchall() == [
            ("c1", None), ("c2", 2)]


def test_a_missing_extra_is_named_in_one_line(tmp_path: Path) -> None:
    # A pyiceberg that cannot be imported, first on the path of this process and its query child.
    (tmp_path / "pyiceberg").mkdir()
    (tmp_path / "pyiceberg" / "__init__.py").write_text("raise ImportError('not installed')\n")
    env = python_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    for args in (["sql", "--catalog", "x", "SELECT 1"], ["export", "--db", "none.duckdb", "--catalog", "x"]):
        done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1
        assert done.stderr.strip().count("\n") == 0 and "looptrace[scale]" in done.stderr, done.stderr


def test_an_unconfigured_catalog_says_how_to_configure_it(tmp_path: Path) -> None:
    env = {k: v for k, v in python_env().items() if not k.startswith("PYICEBERG_")}
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "sql", "--catalog", "nowhere", "SELECT 1"],
                          cwd=tmp_path, env={**env, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "PYICEBERG_CATALOG__NOWHERE__URI" in done.stderr, done.stderr


def _ts():  # noqa: ANN202
    from datetime import datetime

    return datetime(2026, 12, 1, 12, 0, 0)



def test_report_and_view_read_a_catalog(demo: Path, exported_env: dict[str, str], tmp_path: Path) -> None:
    import asyncio

    from looptrace.viewer.app import ViewerApp
    from looptrace.viewer.capture import settle
    from looptrace.viewer.widgets import RunsTable

    n_runs = query(demo, "SELECT count(*) FROM runs WHERE status <> 'incomplete'")[0][0]
    done = cli("report", "--all", "--catalog", "exported", "-o", str(tmp_path / "report"), env=exported_env)
    assert f"{n_runs} runs" in done.stdout and (tmp_path / "report" / "index.html").is_file(), done.stdout

    async def rows(db: str) -> list[tuple[str, ...]]:
        app = ViewerApp(db, refresh_seconds=None)
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot)
            table = app.screen.query_one(RunsTable)
            return sorted(tuple(str(getattr(c, "plain", c)) for c in table.get_row_at(i)) for i in range(table.row_count))

    over_catalog, over_store = asyncio.run(rows("iceberg:exported")), asyncio.run(rows(str(demo)))
    assert over_catalog == over_store and len(over_catalog) > 3  # the same runs screen, row for row
    missing = cli("view", "--catalog", "nowhere", ok=False)
    assert missing.returncode == 1 and missing.stderr.startswith("error: catalog 'nowhere'"), missing.stderr


def test_import_into_a_catalog_is_idempotent_and_reads_like_a_store(tmp_path: Path,
                                                                    sqlite_catalog: dict[str, str]) -> None:
    catalog = sqlite_catalog
    import json

    files = tmp_path / "chats"
    files.mkdir()
    for i in range(3):
        chat = [{"role": "user", "content": f"question {i}: where is the deploy note?"},
                {"role": "assistant", "content": f"Looking for note {i}."},
                {"role": "assistant", "content": f"It is in notes.txt, line {i}."}]
        (files / f"chat-{i}.json").write_text(json.dumps({"messages": chat}))
    store = tmp_path / "store.duckdb"
    first = cli("import", str(files), "--catalog", NAME, env=catalog)
    assert "runs imported: 3" in first.stdout, first.stdout + first.stderr
    again = cli("import", str(files), "--catalog", NAME, env=catalog)
    assert "runs imported: 0" in again.stdout and "runs already present: 3" in again.stdout, again.stdout
    cli("import", str(files), "--db", str(store))
    sql = "SELECT run_id, agent, status, n_steps FROM runs ORDER BY run_id"
    with open_source(f"iceberg:{NAME}").reader() as conn:
        assert conn.execute(sql).fetchall() == query(store, sql)
        # Diagnosed as they landed, as an import into a store is.
        assert conn.execute("SELECT count(DISTINCT run_id) FROM diagnoses").fetchone() == (3,)
