"""Ctrl-C during ``looptrace import``: it says how many files and runs it kept, and they are diagnosed.

Issue 28: it printed ``interrupted`` above the progress bar, no count, and left the kept runs without
diagnoses until a re-run. A real import process over real files, interrupted with a real SIGINT.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path

from .conftest import PYTHON, ROOT, python_env, query


def test_an_interrupted_import_says_what_it_kept_and_diagnoses_it(tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(3000):
        (folder / f"chat-{i:05d}.json").write_text(json.dumps({"messages": [
            {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]}))
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "import", str(folder), "--db", str(db)],
                            cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # a progress line every 100 files: some are stored by now
    assert line.startswith("imported "), line + proc.stderr.read()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (out, err)
    found = re.search(r"interrupted after (\d+) of 3000 files: kept (\d+) new runs", err)
    assert found, err
    files, kept = int(found.group(1)), int(found.group(2))
    assert 100 <= files < 3000 and kept == files  # one run a file, none skipped
    assert "Run the same command again to import the rest" in err
    assert query(db, "SELECT count(*) FROM runs") == [(kept,)]
    assert query(db, "SELECT count(DISTINCT run_id) FROM diagnoses") == [(kept,)]  # diagnosed, as any import
    assert f"diagnosed {kept} runs" in out

    again = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "import", str(folder), "--db", str(db)],
                           cwd=ROOT, env=python_env(), capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert f"runs imported: {3000 - kept}" in again.stdout and f"runs already present: {kept}" in again.stdout
    assert query(db, "SELECT count(*) FROM runs") == [(3000,)]
