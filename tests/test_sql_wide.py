"""``looptrace sql`` on a wide result stays readable: one record at a time when columns would be squeezed.

Issue 28: ``SELECT * FROM runs``, the most natural first query, printed 23 columns four characters
wide with headings split over lines. Run as a user runs it: the real command over the demo store.
"""

from __future__ import annotations

import subprocess

import pytest
from pathlib import Path

from looptrace.tracer.cli.table import fits, vertical_lines

from .conftest import PYTHON, ROOT, python_env, query


def sql(db: Path, statement: str, *flags: str, columns: int = 120) -> list[str]:
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "sql", "--db", str(db), statement, *flags],
                          cwd=ROOT, env={**python_env(), "COLUMNS": str(columns)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_select_star_from_runs_prints_a_record_at_a_time(demo: Path) -> None:
    names = [r[0] for r in query(demo, "SELECT column_name FROM (DESCRIBE runs)")]
    lines = sql(demo, "SELECT * FROM runs ORDER BY started_at, run_id LIMIT 2")
    assert all(len(line) <= 120 for line in lines)
    assert [line for line in lines if line.startswith("─[ row ")] == [
        line for line in lines if line.startswith("─[ row 1 ]") or line.startswith("─[ row 2 ]")]
    fields = [line.split(" │", 1)[0].strip() for line in lines if " │" in line]
    assert fields == names * 2  # every column, whole, once per row
    [(first_id, first_task)] = query(demo, "SELECT run_id, task FROM runs ORDER BY started_at, run_id LIMIT 1")
    assert f"run_id{' ' * (max(map(len, names)) - 6)} │ {first_id}" in lines
    assert any(line.endswith(f"│ {first_task}") for line in lines)
    assert lines[-1] == "(2 rows)"


def test_long_values_are_cut_to_the_line_unless_full(demo: Path) -> None:
    statement = "SELECT *, repeat('x', 300) AS long FROM runs LIMIT 1"
    cut = sql(demo, statement, columns=100)
    [long] = [line for line in cut if line.startswith("long ")]
    assert len(long) <= 100 and long.endswith("…")
    assert "(values cut to the width: --full shows them whole)" in cut
    whole = sql(demo, statement, "--full", columns=100)
    [long] = [line for line in whole if line.startswith("long ")]
    assert long.endswith("x" * 300)


def test_a_narrow_result_stays_a_table(demo: Path) -> None:
    lines = sql(demo, "SELECT status, count(*) AS n FROM runs GROUP BY status ORDER BY status")
    assert lines[0].split() == ["status", "n"] and not any(line.startswith("─[ row") for line in lines)


def test_fits_and_vertical_lines_as_plain_functions() -> None:
    assert fits(["a", "b"], [["1", "2"]], 10)
    assert not fits([f"c{i}" for i in range(23)], [["x" * 20] * 23], 160)  # 23 columns of 10 need 296
    assert vertical_lines(["id", "task"], [["r1", "a very long task"]], 20, full=False) == [
        "─[ row 1 ]" + "─" * 10, "id   │ r1", "task │ a very long …"]


def test_json_is_json_with_every_column(demo: Path) -> None:
    """``--format json`` printed NaN and Infinity (not JSON: jq and JSON.parse refuse them) and kept one
    value of two columns of the same name (a join's two run_ids)."""
    import json

    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "sql", "--db", str(demo), "--format", "json",
                           "SELECT 1 AS a, 2 AS a, 'nan'::DOUBLE AS n, ['-inf'::DOUBLE, 1.5] AS l"],
                          capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert rows == [{"a": 1, "a_1": 2, "n": "NaN", "l": ["-Infinity", 1.5]}]
