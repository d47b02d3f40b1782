"""Bad input as a newcomer gave it: one clear line, a non-zero exit, nothing left behind.

A truncated store (``head -c 1000000 demo.duckdb > t.duckdb``) opened fine in DuckDB, which reads
blocks lazily, and failed mid-query: tracebacks from ``analyze``, ``import`` and ``report`` (which
also left an empty output folder), a bare IO error from ``sql``, and ``compact`` said ``absorbed 0
segments`` and exited 0. A store with a damaged block failed the same way wherever the block was
read. Non-UTF-8 query text gave DuckDB's ``TypeError``; numeric flags took any number
(``view --refresh -1`` redrew in a tight loop at 100% CPU). Each is run here through the real CLI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from looptrace.tracer.store.wholeness import cut_short

from .conftest import PYTHON, ROOT, python_env

MAGENTIC = ROOT / "tests" / "fixtures" / "multi_agent" / "magentic_done.json"


def looptrace(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True,
                          env=python_env(), cwd=cwd, timeout=120)


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def truncated(demo: Path, tmp_path: Path) -> Path:
    """The demo's store cut at 1,000,000 bytes, as ``head -c`` cuts it."""
    whole = tmp_path / "demo.duckdb"
    shutil.copy(demo, whole)
    assert os.path.getsize(whole) > 1_000_000
    cut = tmp_path / "t.duckdb"
    with open(whole, "rb") as src, open(cut, "wb") as dst:
        dst.write(src.read(1_000_000))
    assert cut_short(whole) is None and cut_short(cut) == (1_000_000, os.path.getsize(whole))
    whole.unlink()
    return cut


COMMANDS = {
    "analyze": ["analyze", "--db", "t.duckdb"],
    "import": ["import", str(MAGENTIC), "--db", "t.duckdb"],
    "report_all": ["report", "--all", "--db", "t.duckdb", "-o", "out/report"],
    "report_run": ["report", "819ff", "--db", "t.duckdb", "-o", "out/run.html"],
    "sql": ["sql", "--db", "t.duckdb", "SELECT count(*) FROM steps"],
    "compact": ["compact", "--db", "t.duckdb"],
    "export": ["export", "--db", "t.duckdb", "--parquet", "out/parquet"],
    "diff": ["diff", "a", "b", "--db", "t.duckdb"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_truncated_store_is_one_line_and_a_failure_on_every_command(truncated: Path, command: str) -> None:
    before = truncated.read_bytes()
    done = looptrace(*COMMANDS[command], cwd=truncated.parent)
    _one_line_error(done, "t.duckdb", "cut short", "1,000,000")
    assert not (truncated.parent / "out").exists(), "an output folder was left behind"
    assert truncated.read_bytes() == before  # not changed


@pytest.mark.parametrize("command", ["analyze", "sql", "report_all", "compact"])
def test_a_store_with_a_damaged_block_is_one_line_and_a_failure(demo: Path, tmp_path: Path, command: str) -> None:
    store = tmp_path / "t.duckdb"
    shutil.copy(demo, store)
    size = os.path.getsize(store)
    with open(store, "r+b") as f:  # every block after the headers: whichever one a command reads first
        for at in range(3 * 4096 + 64, size, 64 * 1024):
            f.seek(at)
            f.write(b"\xff" * 512)
    done = looptrace(*COMMANDS[command], cwd=tmp_path)
    _one_line_error(done, "t.duckdb", "not a readable looptrace store")
    assert not (tmp_path / "out").exists()


def test_sql_text_that_is_not_utf8_is_named(demo: Path, tmp_path: Path) -> None:
    done = subprocess.run([PYTHON.encode(), b"-m", b"looptrace.tracer.cli", b"sql", b"--db", os.fsencode(demo),
                           b"SELECT '\xff\xfe' FROM runs"], capture_output=True, text=True, env=python_env(),
                          cwd=tmp_path, timeout=120)
    _one_line_error(done, "not UTF-8", "0xff", "character 9")


BAD_FLAGS = [
    ["view", "x.duckdb", "--refresh", "-1"],
    ["view", "x.duckdb", "--refresh", "nan"],
    ["view", "x.duckdb", "--refresh", "0.001"],
    ["view", "x.duckdb", "--web", "--port", "70000"],
    ["sql", "--db", "x.duckdb", "--limit", "-1", "SELECT 1"],
    ["sql", "--db", "x.duckdb", "--timeout", "inf", "SELECT 1"],
    ["collect", "--db", "x.duckdb", "--settle", "-1"],
    ["collect", "--db", "x.duckdb", "--max-body-mb", "0"],
    ["collect", "--db", "x.duckdb", "--diagnose-every", "-5"],
    ["collect", "--db", "x.duckdb", "--port", "-4"],
    ["analyze", "--db", "x.duckdb", "--repeat-min", "-2"],
    ["analyze", "--db", "x.duckdb", "--context-near", "nan"],
    ["replay", "abc", "--db", "x.duckdb", "--max-iters", "0"],
    ["replay", "abc", "--db", "x.duckdb", "--budget", "-1"],
    ["fork", "abc", "--db", "x.duckdb", "--at", "0"],
    ["serve", "abc", "--db", "x.duckdb", "--port", "-1"],
    ["run", "a task", "--max-iters", "-3"],
]


@pytest.mark.parametrize("argv", BAD_FLAGS, ids=[" ".join(a[:1] + a[-2:]) for a in BAD_FLAGS])
def test_every_numeric_flag_is_checked_before_anything_runs(tmp_path: Path, argv: list[str]) -> None:
    done = looptrace(*argv, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and ": error: argument --" in last, done.stderr
    assert not list(tmp_path.iterdir())  # nothing was started: no store, no folder


def test_the_thresholds_file_is_checked_too(tmp_path: Path) -> None:
    config = tmp_path / "t.toml"
    config.write_text("[analyzer]\nrepeat_min = -1\n")
    (tmp_path / "x.duckdb").write_bytes(b"")
    done = looptrace("analyze", "--db", "x.duckdb", "--config", str(config), cwd=tmp_path)
    _one_line_error(done, "repeat_min", "at least 0")
