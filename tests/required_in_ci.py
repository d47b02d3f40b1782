"""A pytest plugin `.ci/run` loads: under ``CI=true`` the tests the README lists as required must run.

A test that needs something from outside the project (the shared corpus, chromium, the duckdb CLI)
skips where that is missing, which is right on a developer's machine and wrong in CI, where
`make test` installs them: there a skip would report green for a test that never ran. The README's
section "What CI requires" lists those tests in a ``required-in-ci`` block; this plugin reads it
from there (the README.md in pytest's rootdir: one list, for the reader and the check) and, under
``CI=true``, fails the run when one of them was skipped or not collected at all. It adds a section
to the terminal summary and sets the exit status; pytest's own summary line still ends the output.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["required_tests", "problems"]

_FENCE = "```text required-in-ci"


def required_tests(readme: str) -> list[str]:
    """The node ids (a file, a test, or a test without its parameters) in the README's required block."""
    lines = readme.splitlines()
    start = lines.index(_FENCE) + 1
    end = lines.index("```", start)
    ids = [line.split("#", 1)[0].strip() for line in lines[start:end]]
    return [i for i in ids if i]


def _covers(required: str, nodeid: str) -> bool:
    return nodeid == required or nodeid.startswith((required + "::", required + "["))


def problems(required: list[str], outcomes: dict[str, str]) -> list[str]:
    """What is wrong with each required id, given the outcome ("ran" or "skipped") of each test that ran."""
    found = []
    for rid in required:
        covered = {n: o for n, o in outcomes.items() if _covers(rid, n)}
        if not covered:
            found.append(f"{rid}: did not run (not collected, or its setup failed)")
        found += [f"{n}: skipped" for n, o in sorted(covered.items()) if o == "skipped"]
    return found


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


class _Check:
    def __init__(self, config: pytest.Config) -> None:
        self.readme = config.rootpath / "README.md"
        self.outcomes: dict[str, str] = {}
        self.found: list[str] = []

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # An expected failure is reported as skipped with ``wasxfail``: the test ran.
        if report.skipped and not hasattr(report, "wasxfail"):
            self.outcomes[report.nodeid] = "skipped"
        elif report.when == "call" and self.outcomes.get(report.nodeid) != "skipped":
            self.outcomes[report.nodeid] = "ran"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.found = problems(required_tests(self.readme.read_text(encoding="utf-8")), self.outcomes)
        if self.found and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.found:
            terminalreporter.section("required in CI (README, What CI requires)", sep="=", red=True)
            for line in self.found:
                terminalreporter.line(f"REQUIRED {line}")


def pytest_configure(config: pytest.Config) -> None:
    # PYTEST_ADDOPTS reaches every pytest the suite starts (an exported test run in a temp folder):
    # only a run whose rootdir has a README is the project's own; the others are not checked.
    if _in_ci() and (config.rootpath / "README.md").is_file():
        config.pluginmanager.register(_Check(config), "looptrace-required-in-ci")
