"""``looptrace view`` on anything that is not a store: one line naming the file, exit 1, nothing changed
(issue 18 case 7, issue 20). Before, a folder that was not an export raised ``ExportError`` out of the
app's constructor as a traceback, and a foreign file failed inside the running app."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from looptrace.tracer.export.layout import MANIFEST

from .conftest import PYTHON, ROOT, python_env


def _random_bytes(tmp: Path, demo: Path) -> Path:
    p = tmp / "random.duckdb"
    p.write_bytes(os.urandom(64 * 1024))
    return p


def _csv(tmp: Path, demo: Path) -> Path:
    p = tmp / "runs.csv"
    p.write_text("run_id,status\nr1,ok\n")
    return p


def _json(tmp: Path, demo: Path) -> Path:
    p = tmp / "package.json"  # DuckDB picks a reader by extension: this failed with a Catalog Error
    p.write_text('{"name": "x"}\n')
    return p


def _empty(tmp: Path, demo: Path) -> Path:
    p = tmp / "empty.duckdb"
    p.write_bytes(b"")
    return p


def _truncated_store(tmp: Path, demo: Path) -> Path:
    p = tmp / "cut.duckdb"
    p.write_bytes(demo.read_bytes()[: demo.stat().st_size // 3])
    return p


def _plain_duckdb(tmp: Path, demo: Path) -> Path:
    import duckdb

    p = tmp / "other.duckdb"
    conn = duckdb.connect(str(p))
    conn.execute("CREATE TABLE t AS SELECT 1 AS x")
    conn.close()
    return p


def _folder(tmp: Path, demo: Path) -> Path:
    p = tmp / "not-an-export"
    p.mkdir()
    (p / "notes.txt").write_text("hello")
    return p


def _bad_manifest(tmp: Path, demo: Path) -> Path:
    p = tmp / "bad-export"
    p.mkdir()
    (p / MANIFEST).write_text("{not json")
    return p


CASES: dict[str, Callable[[Path, Path], Path]] = {
    "random-bytes": _random_bytes, "csv-text": _csv, "json-file": _json, "empty-file": _empty, "truncated-store": _truncated_store,
    "plain-duckdb": _plain_duckdb, "folder-not-an-export": _folder, "export-with-a-bad-manifest": _bad_manifest,
}


def _digest(path: Path) -> dict[str, str]:
    files = [path] if path.is_file() else sorted(path.rglob("*"))
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files if f.is_file()}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_view_refuses_what_is_not_a_store_with_one_line(tmp_path: Path, demo: Path, case: str) -> None:
    path = CASES[case](tmp_path, demo)
    before, listing = _digest(path), sorted(os.listdir(tmp_path))
    proc = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "view", str(path)], cwd=ROOT, env=python_env(),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1, (proc.stdout[-500:], proc.stderr[-2000:])
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(path) in lines[0], proc.stderr
    assert "\x1b" not in proc.stdout  # the terminal was never taken over
    assert _digest(path) == before and sorted(os.listdir(tmp_path)) == listing


def test_view_names_a_missing_path(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.duckdb"
    proc = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "view", str(path)], cwd=ROOT, env=python_env(),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and len(proc.stderr.splitlines()) == 1 and str(path) in proc.stderr
    assert not path.exists()


@pytest.mark.parametrize("name", ["anything.json", "notes.txt", "data.parquet.dat"])
def test_sql_names_any_file_that_is_not_a_store_whatever_its_extension(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text('{"runs": []}\n')
    proc = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "sql", "--db", str(path), "SELECT 1"], cwd=ROOT,
                          env=python_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"error: {path}: not a readable looptrace store (not a DuckDB database file). "
        "Point --db at a store written by looptrace, or move this file away; it was not changed."]
    assert path.read_text() == '{"runs": []}\n'
