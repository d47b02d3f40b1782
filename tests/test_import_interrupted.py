"""Ctrl-C during ``looptrace import``: it says how many files and runs it kept, and they are diagnosed.

Issue 28: it printed ``interrupted`` above the progress bar, no count, and left the kept runs without
diagnoses until a re-run. A real import process over real files, interrupted with a real SIGINT.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from .conftest import PYTHON, ROOT, python_env, query

F_SETPIPE_SZ = 1031  # Linux: the pipe's capacity, so that it is full after a known number of bytes


def test_an_interrupted_import_says_what_it_kept_and_diagnoses_it(tmp_path: Path, db: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    for i in range(3000):
        (folder / f"chat-{i:05d}.json").write_text(json.dumps({"messages": [
            {"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]}))
    # The import's stderr is a pipe the test has already filled: its first progress line (100 files in) blocks
    # it, and the SIGINT lands then, however slow this machine is. Reading the line and then signalling raced:
    # under load the import could finish all 3000 files first.
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, F_SETPIPE_SZ, 4096)
    os.set_blocking(write_end, False)
    filled = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            filled += os.write(write_end, b"#" * 512)
    os.set_blocking(write_end, True)
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "import", str(folder), "--db", str(db)],
                            cwd=ROOT, env=python_env(), stdout=subprocess.PIPE, stderr=write_end, text=True)
    os.close(write_end)
    deadline = time.monotonic() + 120
    while "pipe_write" not in Path(f"/proc/{proc.pid}/wchan").read_text():
        assert proc.poll() is None and time.monotonic() < deadline, "the import never wrote its progress"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    with os.fdopen(read_end, "rb") as stderr:
        err = stderr.read()[filled:].decode()
    out = proc.communicate(timeout=120)[0]
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
