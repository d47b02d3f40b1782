"""``xdist_group`` marks keep their tests on one worker (tests/xdist_groups.py), in a real ``-n 2`` run.

With pytest 9 and pytest-xdist 3.8 alone, the marks were silently ignored: a group's tests went to both
workers and each built the group's shared set-up (issue 39).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from .conftest import PYTHON, ROOT, python_env

CONFTEST = """
from tests.xdist_groups import pytest_configure_node, pytest_unconfigure, pytest_xdist_make_scheduler, write_groups

def pytest_collection_modifyitems(config, items):
    write_groups(config, items)
"""
GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("shared")

@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    pass
"""
FREE = """
import pytest

@pytest.mark.parametrize("i", range(6))
def test_free(i):
    pass
"""


def test_a_groups_tests_run_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    (tmp_path / "test_free.py").write_text(FREE)
    # Only xdist: the other installed plugins (Hypothesis, Playwright, ...) cost each process seconds.
    env = {**python_env(), "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([PYTHON, "-m", "pytest", "-v", "-p", "xdist.plugin", "-n", "2", "--dist", "loadgroup",
                           "-p", "no:cacheprovider", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"^\[(gw\d)\] .*PASSED (test_\w+\.py::test_\w+\[\d\])", done.stdout, re.M)
    assert len(ran) == 12, done.stdout
    workers = {worker for worker, test in ran if test.startswith("test_grouped.py")}
    assert len(workers) == 1, f"the group ran on {sorted(workers)}:\n{done.stdout}"
