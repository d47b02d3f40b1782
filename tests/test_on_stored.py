"""Diagnoses as runs land: import and collect call the ``looptrace.on_stored`` hooks, incrementally,
and a failing hook is one warning line, never a failed command."""

from __future__ import annotations

import io
import signal
import subprocess
from pathlib import Path

import pytest

from looptrace.replay.auto_analyze import analyze_new, pending_runs
from looptrace.tracer.on_stored import ON_STORED_GROUP, notify_stored
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query
from .test_importers import looptrace, mini, swe0, write
from .test_ingest import genai_agent, send


def test_import_diagnoses_the_runs_it_imported_and_only_those(tmp_path: Path, db: Path) -> None:
    write(tmp_path / "in" / "a.traj", swe0())
    done = looptrace("import", str(tmp_path / "in"), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "diagnosed 1 run: " in done.stdout
    assert query(db, "SELECT count(DISTINCT run_id) FROM diagnoses") == [(1,)]
    [(first_at,)] = query(db, "SELECT max(analyzed_at) FROM diagnoses")

    write(tmp_path / "more" / "b.traj.json", mini())
    done = looptrace("import", str(tmp_path / "more"), "--db", str(db))
    assert "diagnosed 1 run: " in done.stdout
    assert query(db, "SELECT count(DISTINCT run_id) FROM diagnoses") == [(2,)]
    assert query(db, "SELECT count(*) FROM diagnoses WHERE analyzed_at = ?", [first_at]) != [(0,)]

    again = looptrace("import", str(tmp_path / "more"), "--db", str(db))  # nothing new: nothing analysed
    assert "diagnosed" not in again.stdout


def test_pending_runs_are_those_without_a_diagnosis(tmp_path: Path, db: Path) -> None:
    from looptrace.tracer.ingest.files.importing import import_paths

    write(tmp_path / "in" / "a.traj", swe0())
    import_paths(Store(db), [tmp_path / "in"])
    pending = pending_runs(Store(db))
    assert len(pending) == 1
    results = analyze_new(Store(db))
    assert [r.run_id for r in results] == pending
    assert pending_runs(Store(db)) == ([] if results[0].diagnoses else pending)
    assert analyze_new(Store(db), []) == []  # an empty selection is nothing, not "every run"


@pytest.mark.slow
def test_collect_diagnoses_runs_as_they_land(db: Path) -> None:
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--db", str(db), "--port", "0",
                             "--grpc-port", "off", "--settle", "0.2", "--diagnose-every", "0.5"], cwd=ROOT, env=python_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split("listening on ", 1)[1].split(",", 1)[0]
        send(url, genai_agent)
        # While still collecting, the run is diagnosed: the hook's line arrives before we stop it.
        assert proc.stdout.readline().startswith("diagnosed 1 run: ")
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert query(db, "SELECT r.agent FROM runs r JOIN diagnoses d USING (run_id) WHERE d.is_primary") == [("fixer",)]


def test_a_failing_hook_is_one_warning_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A real installed plug-in: a dist-info on sys.path declaring a hook in the group.
    (tmp_path / "broken_hook.py").write_text("def hook(db, run_ids):\n    raise RuntimeError('disk on fire')\n")
    info = tmp_path / "broken_hook-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-hook\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[{ON_STORED_GROUP}]\nzz_broken = broken_hook:hook\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    db = tmp_path / "none.duckdb"
    out = io.StringIO()
    lines = notify_stored(str(db), [], out=out)
    assert out.getvalue().splitlines() == lines
    assert lines == [f"warning: zz_broken after storing runs failed (RuntimeError: disk on fire); "
                     f"run `looptrace zz_broken --db {db}` to retry"]
