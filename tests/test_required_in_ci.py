"""The CI check that the README's required tests ran (tests/required_in_ci.py), in a real pytest run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, ROOT, python_env
from .required_in_ci import forbidden_skips, installed_words, problems, required_tests

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
    ({"t.py::a": "ran", "t.py::b": "xfailed", "u.py::c": "ran"}, ["t.py::b: xfailed"]),
], ids=["all-ran", "one-parameter-skipped", "skipped-and-missing", "a-longer-name-is-another-test", "xfail-is-not-run"])
def test_problems(outcomes: dict[str, str], expected: list[str]) -> None:
    assert problems(["t.py::a", "t.py::b", "u.py::c"], outcomes) == expected


PROJECT_README = """# a project

```text installed-in-ci
could not import   # importorskip's own reason
chromium
port
```

```text required-in-ci
test_x.py::test_needs_a_tool   # skips where the tool is missing
test_x.py::test_gone           # renamed since
test_x.py::test_known_gap      # given up mid-test: not a run
test_x.py::test_known_miss     # a strict xfail mark: it ran, and stays a miss
```
"""
PROJECT_TESTS = """
import pytest

def test_needs_a_tool():
    pytest.skip("no such tool here")

def test_other():
    pytest.skip("not required, and nothing CI installs: a platform without a wheel")

def test_browser():
    pytest.skip("no chromium on this machine")

def test_fixed_port():
    pytest.skip("port 8008 is taken")

def test_reporting():
    pytest.skip("reports are for another platform")  # 'port' inside a word is not the word

def test_known_gap():
    pytest.xfail("the shell is too old")

@pytest.mark.xfail(strict=True, reason="a known miss")
def test_known_miss():
    assert False
"""
PROJECT_MODULE_SKIP = """
import pytest
pytest.importorskip("no_such_package_anywhere")

def test_never():
    pass
"""


def _pytest(project: Path, ci: str, *more: str) -> subprocess.CompletedProcess[str]:
    # Only the plugins this needs: every other installed one (Hypothesis, Playwright, anyio, ...) cost each
    # of the three runs' processes seconds of imports (issue 39).
    env = {**python_env(), "CI": ci, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)  # .ci/run's, which loads the plugin already
    args = ["-q", "-p", "xdist.plugin", "-p", "tests.required_in_ci", "-p", "no:cacheprovider", *more, str(project)]
    return subprocess.run([PYTHON, "-m", "pytest", *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=120)


def test_under_ci_a_skipped_or_missing_required_test_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(PROJECT_README)
    (tmp_path / "test_x.py").write_text(PROJECT_TESTS)
    (tmp_path / "test_y.py").write_text(PROJECT_MODULE_SKIP)
    for args in ([], ["-n", "2"]):  # alone, and under pytest-xdist (the controller sees every worker's reports)
        done = _pytest(tmp_path, "true", *args)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        required = sorted(line for line in lines if line.startswith("REQUIRED"))
        assert required == [
            "REQUIRED test_x.py::test_browser: skipped although CI installs 'chromium': no chromium on this machine",
            "REQUIRED test_x.py::test_fixed_port: skipped although CI installs 'port': port 8008 is taken",
            f"REQUIRED test_x.py::test_gone: {NOT_RUN}",
            "REQUIRED test_x.py::test_known_gap: xfailed",
            "REQUIRED test_x.py::test_needs_a_tool: skipped",
            "REQUIRED test_y.py: skipped although CI installs 'could not import': could not import "
            "'no_such_package_anywhere': No module named 'no_such_package_anywhere'",
        ], (args, done.stdout)
        assert SUMMARY.match(lines[-1]), lines[-1]  # pytest's summary line still ends the output
    # Outside CI the same skips are only listed (-ra) and the run passes.
    done = _pytest(tmp_path, "")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "REQUIRED" not in done.stdout and SUMMARY.match(done.stdout.splitlines()[-1])


def test_the_readme_says_what_ci_installs() -> None:
    words = installed_words(README)
    assert {"could not import", "chromium", "ag2", "port", "corpus"} <= set(words)
    assert forbidden_skips(words, {"a::b": "could not import 'pyiceberg': No module named 'pyiceberg'",
                                   "a::c": "no Hyperscan wheel on this platform"}) == [
        "a::b: skipped although CI installs 'could not import': could not import 'pyiceberg': "
        "No module named 'pyiceberg'"]
