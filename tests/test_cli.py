"""The command line: help for every command, and `looptrace sql` on a locked-down connection."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from looptrace.tracer.cli.main import build_parser

from .conftest import PYTHON, ROOT, python_env
from .test_manual_api import example_agent


def looptrace(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True, env=python_env(),
                          cwd=cwd or ROOT, timeout=60)


def command_names() -> list[str]:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


def test_help_lists_every_command_and_each_has_an_example() -> None:
    top = looptrace("--help")
    assert top.returncode == 0
    names = command_names()
    assert {"sql", "compact", "demo", "run"} <= set(names)
    for name in names:
        assert name in top.stdout
        sub = looptrace(name, "--help")
        assert sub.returncode == 0 and "example:" in sub.stdout and f"looptrace {name}" in sub.stdout, name


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    example_agent(db)
    return db


def test_sql_prints_table_csv_and_json(store: Path) -> None:
    query = "SELECT step, tool FROM steps ORDER BY step"
    table = looptrace("sql", "--db", str(store), query)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[0].split() == ["step", "tool"]
    assert "(3 rows)" in table.stdout
    csv = looptrace("sql", "--db", str(store), query, "--format", "csv")
    assert csv.stdout.splitlines() == ["step,tool", "1,ls", "2,read", "3,cat"]
    data = json.loads(looptrace("sql", "--db", str(store), query, "--format", "json").stdout)
    assert data == [{"step": 1, "tool": "ls"}, {"step": 2, "tool": "read"}, {"step": 3, "tool": "cat"}]


@pytest.mark.parametrize(
    "attack",
    [
        "COPY (SELECT * FROM runs) TO '{out}'",
        "SELECT * FROM read_csv('/etc/passwd')",
        "ATTACH '{out}' AS other",
        "INSTALL httpfs",
        "LOAD httpfs",
        "SET enable_external_access = true",
        "SELECT 1; COPY (SELECT 1) TO '{out}'",
        "CREATE TABLE x AS SELECT 1",
    ],
)
def test_sql_refuses_file_access_extensions_settings_and_writes(store: Path, tmp_path: Path, attack: str) -> None:
    out = tmp_path / "leak.csv"
    result = looptrace("sql", "--db", str(store), attack.format(out=out))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert not out.exists()
    assert {p.name for p in tmp_path.iterdir()} <= {"store.duckdb", "store.duckdb.segments"}


def test_hostile_text_is_escaped_in_tables(tmp_path: Path) -> None:
    from looptrace.tracer import Tracing

    db = tmp_path / "store.duckdb"
    with Tracing(db) as tracing, tracing.run("a") as run, run.step("\x1b]0;pwned\x07\x1b[2J [bold]x[/]") as step:
        with step.tool_call("t", {}) as call:
            call.result("\u202eevil\x9b")
    result = looptrace("sql", "--db", str(db), "SELECT thought, observation FROM steps")
    assert "\x1b" not in result.stdout and "\x9b" not in result.stdout and "\u202e" not in result.stdout
    assert "\\x1b]0;pwned\\x07" in result.stdout and "\\u202eevil" in result.stdout


def test_core_packages_never_import_textual() -> None:
    code = ("import sys, looptrace.tracer, looptrace.tracer.spans.anthropic, looptrace.tracer.cli, looptrace.loop, "
            "looptrace.loop.agent, looptrace.loop.demo, looptrace.loop.commands; looptrace.tracer.cli.build_parser(); "
            "print('textual' in sys.modules, 'looptrace.viewer.app' in sys.modules)")
    result = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=python_env(), cwd=ROOT)
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_sql_table_wraps_long_values_and_full_prints_them_whole(store: Path) -> None:
    env = {"COLUMNS": "60"}
    long = "looptrace " * 30  # 300 characters: wrapped, not cut
    wrapped = looptrace_env(env, "sql", "--db", str(store), f"SELECT 7 AS n, '{long}' AS v")
    assert wrapped.returncode == 0, wrapped.stderr
    lines = wrapped.stdout.splitlines()
    assert max(len(line) for line in lines) <= 60 and len(lines) > 5
    assert "".join("".join(line.split()) for line in lines[2:-1]) == "7" + "looptrace" * 30  # every word kept
    assert lines[-1] == "(1 row)"

    huge = "SELECT repeat('x', 2000) AS v"
    cut = looptrace_env(env, "sql", "--db", str(store), huge)
    assert "".join(cut.stdout.split()).count("x") == 499 and "…" in cut.stdout
    full = looptrace_env(env, "sql", "--db", str(store), huge, "--full")
    assert "".join(full.stdout.split()).count("x") == 2000 and "…" not in full.stdout


def test_plural_forms() -> None:
    from looptrace.tracer.cli.plural import count

    assert [count(n, "run") for n in (0, 1, 2)] == ["0 runs", "1 run", "2 runs"]
    assert count(1, "model call") == "1 model call" and count(3, "model call") == "3 model calls"
    assert count(2, "diagnosis") == "2 diagnoses" and count(1, "diagnosis") == "1 diagnosis"
    assert count(12_000, "span", thousands=True) == "12,000 spans"


def looptrace_env(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True,
                          env={**python_env(), **env}, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("rows", [
    [(1, "ls", None, 2.5), (22, "read_file", "x" * 40, -1.0)],
    [],
    [(None, "", "a b", 0)],
])
def test_the_plain_table_is_the_table_rich_prints(rows: list[tuple[object, ...]]) -> None:
    # A table that fits is printed without rich (start-up); it must look exactly like rich's.
    import io

    from rich.console import Console

    from looptrace.tracer.cli.table import rich_table, write_rows

    columns = ["step", "tool", "note", "cost"]
    ours = io.StringIO()
    write_rows(ours, columns, rows)
    console = Console(file=io.StringIO(), width=160, no_color=True, highlight=False)
    with console.capture() as captured:
        console.print(rich_table(columns, rows))
    expected = [line.rstrip() for line in captured.get().splitlines()]
    assert ours.getvalue().splitlines()[:-1] == expected


def test_a_reader_that_stops_early_gets_no_traceback(store: Path) -> None:
    # `looptrace sql ... | head -1`: the reader closes the pipe after its first line.
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "sql", "--format", "csv",
                             "SELECT range AS n FROM range(200000)", "--db", str(store)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=python_env(), cwd=ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().strip() == b"n"
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
