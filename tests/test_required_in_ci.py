"""The CI check that the README's required tests ran (tests/required_in_ci.py), in a real pytest run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, ROOT, python_env
from .required_in_ci import problems, required_tests

README = (ROOT / "README.md").read_text(encoding="utf-8")
NOT_RUN = "did not run (not collected, or its setup failed)"
# pytest's own last line, e.g. "1 passed, 1 skipped in 0.12s" (with -q) or the same between "=" signs.
SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed|skipped|error)\b.* in [\d.]+s( \([\d:]+\))?\s*=*$")


def test_the_readme_lists_tests_that_exist() -> None:
    required = required_tests(README)
    assert len(required) >= 5
    for rid in required:
        path, _, name = rid.partition("::")
        assert (ROOT / path).is_file(), rid
        assert not name or f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), rid


@pytest.mark.parametrize(("outcomes", "expected"), [
    ({"t.py::a": "ran", "t.py::b[1]": "ran", "u.py::c": "ran"}, []),
    ({"t.py::a": "ran", "t.py::b[1]": "skipped", "u.py::c": "ran"}, ["t.py::b[1]: skipped"]),
    ({"t.py::a": "skipped", "u.py::c": "ran"}, ["t.py::a: skipped", f"t.py::b: {NOT_RUN}"]),
    ({"t.py::a": "ran", "t.py::b": "ran", "u.py::cc": "ran"}, [f"u.py::c: {NOT_RUN}"]),
], ids=["all-ran", "one-parameter-skipped", "skipped-and-missing", "a-longer-name-is-another-test"])
def test_problems(outcomes: dict[str, str], expected: list[str]) -> None:
    assert problems(["t.py::a", "t.py::b", "u.py::c"], outcomes) == expected


PROJECT_README = """# a project

```text required-in-ci
test_x.py::test_needs_a_tool   # skips where the tool is missing
test_x.py::test_gone           # renamed since
```
"""
PROJECT_TESTS = """
import pytest

def test_needs_a_tool():
    pytest.skip("no such tool here")

def test_other():
    pytest.skip("not required")
"""


def _pytest(project: Path, ci: str) -> subprocess.CompletedProcess[str]:
    env = {**python_env(), "CI": ci, "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)  # .ci/run's, which loads the plugin already
    args = ["-q", "-p", "tests.required_in_ci", "-p", "no:cacheprovider", str(project)]
    return subprocess.run([PYTHON, "-m", "pytest", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)


def test_under_ci_a_skipped_or_missing_required_test_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(PROJECT_README)
    (tmp_path / "test_x.py").write_text(PROJECT_TESTS)
    done = _pytest(tmp_path, "true")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "REQUIRED test_x.py::test_needs_a_tool: skipped" in lines
    assert f"REQUIRED test_x.py::test_gone: {NOT_RUN}" in lines
    assert not any("test_other" in line and line.startswith("REQUIRED") for line in lines)
    assert SUMMARY.match(lines[-1]), lines[-1]  # pytest's summary line still ends the output
    # Outside CI the same skips are only listed (-ra) and the run passes.
    done = _pytest(tmp_path, "")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "REQUIRED" not in done.stdout and SUMMARY.match(done.stdout.splitlines()[-1])
