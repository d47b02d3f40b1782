"""A pytest plugin `.ci/run` loads: under ``CI=true`` nothing CI installs may be skipped.

A test that needs something from outside the project (the shared corpus, chromium, a package of a
test extra, a free port) skips where that is missing, which is right on a developer's machine and
wrong in CI, where `make test` installs it: there a skip would report green for a test that never
ran. The README's section "What CI requires" holds two blocks, one list for the reader and the check:

- ``required-in-ci``: node ids (a file, a test, or a test without its parameters) that must run: a
  skip, a ``pytest.xfail()`` called mid-test (it gave up before its claim) or a test no longer
  collected fails. A known miss under a strict ``xfail`` mark ran, and is checked.
- ``installed-in-ci``: what CI installs or provides, as words a skip's reason would name
  (``could not import`` is ``pytest.importorskip``'s own reason). Under ``CI=true`` a skip of any test,
  or of a whole module at collection, whose reason names one of them fails the run.

Other skips (a platform without a Hyperscan wheel, a kernel without user namespaces) stay skips,
listed with their reasons by ``-ra``. The plugin adds a section to the terminal summary and sets the
exit status; pytest's own summary line still ends the output. Under pytest-xdist it runs in the
controller only, which sees every worker's reports.
"""

from __future__ import annotations

import os
import re

import pytest

__all__ = ["required_tests", "installed_words", "problems", "forbidden_skips"]

_REQUIRED = "```text required-in-ci"
_INSTALLED = "```text installed-in-ci"


def _block(readme: str, fence: str) -> list[str]:
    lines = readme.splitlines()
    start = lines.index(fence) + 1
    end = lines.index("```", start)
    entries = [line.split("#", 1)[0].strip() for line in lines[start:end]]
    return [e for e in entries if e]


def required_tests(readme: str) -> list[str]:
    """The node ids in the README's required block."""
    return _block(readme, _REQUIRED)


def installed_words(readme: str) -> list[str]:
    """What CI installs, as the words of the README's installed block."""
    return _block(readme, _INSTALLED)


def _covers(required: str, nodeid: str) -> bool:
    return nodeid == required or nodeid.startswith((required + "::", required + "["))


def problems(required: list[str], outcomes: dict[str, str]) -> list[str]:
    """What is wrong with each required id, given the outcome ("ran", "skipped" or "xfailed") of each
    test that was reported."""
    found = []
    for rid in required:
        covered = {n: o for n, o in outcomes.items() if _covers(rid, n)}
        if not covered:
            found.append(f"{rid}: did not run (not collected, or its setup failed)")
        found += [f"{n}: {o}" for n, o in sorted(covered.items()) if o != "ran"]
    return found


def _names(word: str, reason: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", reason, re.IGNORECASE) is not None


def forbidden_skips(words: list[str], skips: dict[str, str]) -> list[str]:
    """The skips (node id -> reason) whose reason names something CI installs."""
    return [f"{n}: skipped although CI installs {w!r}: {reason}" for n, reason in sorted(skips.items())
            for w in [next((w for w in words if _names(w, reason)), None)] if w is not None]


def _reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, (tuple, list)) and len(longrepr) == 3:  # (path, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


class _Check:
    def __init__(self, config: pytest.Config) -> None:
        self.readme = config.rootpath / "README.md"
        self.outcomes: dict[str, str] = {}
        self.skips: dict[str, str] = {}
        self.found: list[str] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:  # a module skipped whole at collection (a module-level importorskip)
            self.skips[report.nodeid] = _reason(report)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # An expected failure is reported as skipped with ``wasxfail``. Under an ``xfail`` mark it ran
        # and its outcome is checked (a known miss, strict: a pass would fail); called as
        # ``pytest.xfail()`` mid-test it gave up before its claim, which is not a run of it.
        if hasattr(report, "wasxfail"):
            self.outcomes[report.nodeid] = "ran" if "xfail" in report.keywords else "xfailed"
        elif report.skipped:
            self.outcomes[report.nodeid] = "skipped"
            self.skips[report.nodeid] = _reason(report)
        elif report.when == "call" and self.outcomes.get(report.nodeid) not in ("skipped", "xfailed"):
            self.outcomes[report.nodeid] = "ran"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        readme = self.readme.read_text(encoding="utf-8")
        self.found = problems(required_tests(readme), self.outcomes)
        self.found += forbidden_skips(installed_words(readme), self.skips)
        if self.found and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.found:
            terminalreporter.section("required in CI (README, What CI requires)", sep="=", red=True)
            for line in self.found:
                terminalreporter.line(f"REQUIRED {line}")


def pytest_configure(config: pytest.Config) -> None:
    # PYTEST_ADDOPTS reaches every pytest the suite starts (an exported test run in a temp folder):
    # only a run whose rootdir has a README is the project's own; the others are not checked. An
    # xdist worker (it has ``workerinput``) sees only its share: the controller checks the whole run.
    if _in_ci() and (config.rootpath / "README.md").is_file() and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Check(config), "looptrace-required-in-ci")
