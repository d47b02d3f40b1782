"""``looptrace import DIR``: bad files among good ones, the progress bar on a terminal, plug-in formats."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import zipfile
from pathlib import Path

import pytest

from looptrace.tracer.cli import main
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query
from .test_import_formats import CLAUDE_SESSION, MESSAGES


def looptrace(*args: str, env: dict[str, str] | None = None, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True,
                          env=env or python_env(), cwd=ROOT, timeout=120, **kw)  # type: ignore[call-overload]


def bad_and_good(folder: Path) -> dict[str, str]:
    """Good files and bad ones; returns bad file name -> a word its reason must hold. ``truncated.jsonl``
    is a session log cut mid-line (its writer killed mid-write): not a bad file, its whole lines are
    imported as an incomplete run (docs/importers.md, "Bad input")."""
    folder.mkdir(parents=True)
    (folder / "good.json").write_text(json.dumps(MESSAGES))
    (folder / "session.jsonl").write_text("\n".join(json.dumps(e) for e in CLAUDE_SESSION))
    (folder / "truncated.json").write_text(json.dumps(MESSAGES)[:-7])
    (folder / "truncated.jsonl").write_text("\n".join(json.dumps(e) for e in CLAUDE_SESSION)[:-9])
    with zipfile.ZipFile(folder / "other.eval", "w") as z:
        z.writestr("data.csv", "a,b\n")
    (folder / "junk.json").write_bytes(bytes(range(256)) * 8)
    (folder / "junk.eval").write_bytes(os.urandom(512))
    return {"truncated.json": "invalid JSON", "other.eval": "not an Inspect log", "junk.json": "not UTF-8",
            "junk.eval": "not a zip"}


def test_bad_files_get_one_line_each_and_the_rest_is_imported(tmp_path: Path, db: Path) -> None:
    bad = bad_and_good(tmp_path / "in")
    done = looptrace("import", str(tmp_path / "in"), "--db", str(db))
    assert done.returncode == 0, done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("skipped ")]
    assert len(skipped) == len(bad)
    for name, word in bad.items():
        (line,) = [s for s in skipped if s.startswith(f"skipped {(tmp_path / 'in' / name).resolve()}: ")]
        assert word in line, line
    # the message list, the session and its subagent, and the cut session's run and its subagent
    assert "runs imported: 5" in done.stdout
    [(status, error)] = query(db, "SELECT status, error FROM runs WHERE source LIKE '%truncated.jsonl' "
                                  "AND parent_run_id IS NULL")
    assert status == "incomplete" and f"cut line (line {len(CLAUDE_SESSION)}:" in error
    # nothing of a bad file was written
    sources = [str((tmp_path / "in" / name).resolve()) for name in bad]
    assert query(db, "SELECT count(*) FROM run_records WHERE list_contains(?, source)", [sources]) == [(0,)]


def test_same_content_under_another_name_adds_nothing(tmp_path: Path, db: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.json").write_text(json.dumps(MESSAGES))
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "renamed.json").write_text(json.dumps(MESSAGES))
    first = import_paths(Store(db), [tmp_path / "a"])
    again = import_paths(Store(db), [tmp_path / "b"])
    assert (first.runs_imported, again.runs_imported, again.runs_present) == (1, 0, 1)
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


def test_a_progress_bar_on_a_terminal(tmp_path: Path, db: Path) -> None:
    (tmp_path / "in").mkdir()
    for n in range(3):
        (tmp_path / "in" / f"{n}.json").write_text(json.dumps(MESSAGES[: 3 + n]))
    master, slave = pty.openpty()
    try:
        done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "import", str(tmp_path / "in"), "--db", str(db)],
                              stdout=subprocess.PIPE, stderr=slave, text=True, env=python_env(), cwd=ROOT,
                              timeout=120)
        os.close(slave)
        shown = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
    assert done.returncode == 0 and "runs imported: 3" in done.stdout
    text = shown.decode("utf-8", "replace")
    assert "importing" in text and "3/3" in text and "\u2501" in text  # rich's bar is drawn with U+2501


PLUGIN = '''
from looptrace.tracer.ingest.files.registry import Importer
from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory


def detect(path, data):
    return isinstance(data, dict) and data.get("kind") == "toy-agent-log"


def parse(data, path):
    steps = [ImportedStep(step=i + 1, tool=a["tool"], args=a["args"], observation=a["result"])
             for i, a in enumerate(data["actions"])]
    return [Trajectory(source=str(path), agent="toy", status=data["end"], steps=steps)]


IMPORTER = Importer("toy", "a toy agent's logs", detect, parse)
'''


def test_a_plugin_format_is_listed_and_imported(tmp_path: Path, db: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    (site / "toy_importer-0.1.dist-info").mkdir(parents=True)
    (site / "toy_importer.py").write_text(PLUGIN)
    (site / "toy_importer-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-importer\n"
                                                                  "Version: 0.1\n")
    (site / "toy_importer-0.1.dist-info" / "entry_points.txt").write_text(
        "[looptrace.importers]\ntoy = toy_importer:IMPORTER\nbroken = no_such_module:IMPORTER\n")
    monkeypatch.syspath_prepend(str(site))  # as if pip had installed it: found by importlib.metadata
    assert main(["import", "--formats"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert any(line.startswith("toy ") and "a toy agent's logs (plug-in)" in line for line in listed)
    assert any(line.startswith("broken ") and "could not be loaded" in line for line in listed)
    (tmp_path / "log.json").write_text(json.dumps({"kind": "toy-agent-log", "end": "max_iters", "actions": [
        {"tool": "search", "args": {"q": "x"}, "result": "nothing"}]}))
    report = import_paths(Store(db), [tmp_path / "log.json"])
    assert report.by_format == {"toy": 1} and report.runs_imported == 1
    assert query(db, "SELECT agent, status, n_steps FROM runs") == [("toy", "max_iters", 1)]
    assert query(db, "SELECT tool, observation FROM tool_calls") == [("search", "nothing")]
