"""A 1 GB log is streamed: peak memory stays under 500 MB (measured in a child process)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .conftest import PYTHON, ROOT, python_env, query
from .test_import_formats import oh_events

GB = 1 << 30
PEAK_LIMIT_MB = 500
MEASURE = """
import sys
from pathlib import Path
from looptrace.tracer.ingest.files.importing import import_paths
from looptrace.tracer.store import Store
report = import_paths(Store(sys.argv[1]), [Path(sys.argv[2])])
print(report.runs_imported, report.steps_imported, len(report.skipped))
# VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so a child of a large pytest process
# would report its parent's size (611 MB once, in a full run, for an import that peaks near 200 MB).
print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')) // 1024)
"""


def write_big_output(path: Path, size: int) -> int:
    """An OpenHands evaluation ``output.jsonl`` of ``size`` bytes: most of each line is the
    ``llm_completions`` OpenHands keeps (every prompt, whole), which a run does not store."""
    prompt = ("You are OpenHands agent, a helpful AI assistant.\n" * 2000)[:100_000]
    lines = 0
    with open(path, "w") as f:
        written = 0
        while written < size:
            line = json.dumps({"instance_id": f"repo__{lines}", "instruction": f"Issue {lines}",
                               "history": oh_events([]), "error": None,
                               "llm_completions": [{"messages": [{"role": "system", "content": prompt}]}]})
            f.write(line + "\n")
            written += len(line) + 1
            lines += 1
    return lines


@pytest.mark.slow
def test_a_1gb_log_is_streamed_with_bounded_memory(tmp_path: Path, db: Path) -> None:
    path = tmp_path / "output.jsonl"
    lines = write_big_output(path, GB)
    assert path.stat().st_size >= GB
    done = subprocess.run([PYTHON, "-c", MEASURE, str(db), str(path)], capture_output=True, text=True,
                          env=python_env(), cwd=ROOT, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    counts, peak = done.stdout.splitlines()[-2:]
    print(f"1 GiB output.jsonl, {lines} runs: peak RSS {peak} MB")
    assert counts == f"{lines} {2 * lines} 0"  # two steps a run
    assert int(peak) < PEAK_LIMIT_MB
    assert query(db, "SELECT count(*), count(DISTINCT source) FROM runs") == [(lines, 1)]
