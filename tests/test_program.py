"""Hints name looptrace the way it was started, so that they run when pasted (issue 28)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from looptrace.tracer.cli.program import program


def _script(folder: Path) -> Path:
    path = folder / "bin" / "looptrace"
    path.parent.mkdir(parents=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_venv_script_not_on_path_is_named_by_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(tmp_path / ".venv")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program(".venv/bin/looptrace") == ".venv/bin/looptrace"  # as `make demo` starts it
    assert program(str(script)) == os.path.join(".venv", "bin", "looptrace")  # absolute, below here
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert program(str(script)) == str(script)


def test_the_script_the_shell_finds_is_named_looptrace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = _script(tmp_path / ".venv")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")  # an active virtualenv
    assert program(str(script)) == "looptrace"
    assert program("/some/other/bin/looptrace") == "/some/other/bin/looptrace"  # not the one on PATH


def test_python_m_without_a_script_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    assert program("/x/looptrace/tracer/cli/__main__.py").endswith(" -m looptrace.tracer.cli")
