"""Compaction deletes what it absorbed, in the foreground and crash-safely (issue 18, case 4).

Before, deletion ran in a daemon thread that died with ``looptrace compact``, and a compaction with
nothing pending never looked at ``.absorbed/``: after two compactions all 403 absorbed segment files
were still on disk. Here a real process is killed with SIGKILL at each point of a compaction (inside
the absorbing transaction, after its commit, between renames, between deletions), and the next
compaction must leave every row stored exactly once and no segment file behind.
"""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from looptrace.tracer.store import SegmentWriter, Store
from looptrace.tracer.store import segments as seg

from .conftest import PYTHON, ROOT, python_env, query

SEGMENTS = 8

# Runs one compaction of argv[1], killing itself with SIGKILL at the point named by argv[2].
_COMPACT_AND_DIE = """
import os, shutil, signal, sys
from looptrace.tracer.store import Store
from looptrace.tracer.store import segments as seg

def kill_at(original, at):
    calls = [0]
    def wrapper(*args, **kwargs):
        calls[0] += 1
        if calls[0] >= at:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*args, **kwargs)
    return wrapper

point = sys.argv[2]
if point == "inside-the-transaction":
    seg.segment_files = kill_at(seg.segment_files, 2)  # after BEGIN and the first table's INSERT
elif point == "after-commit":
    seg.remove_segments = kill_at(seg.remove_segments, 1)
elif point == "between-renames":
    os.rename = kill_at(os.rename, 4)
elif point == "between-deletions":
    shutil.rmtree = kill_at(shutil.rmtree, 4)
print(Store(sys.argv[1]).compact())
"""

POINTS = ["inside-the-transaction", "after-commit", "between-renames", "between-deletions"]


def _row(i: int) -> dict[str, object]:
    now = datetime(2026, 1, 1)
    return {"run_id": f"r{i}", "recorded_at": now, "started_at": now, "agent": "a"}


def write_segments(db: Path, n: int = SEGMENTS) -> list[str]:
    writer = SegmentWriter(db)
    names = [writer.write({"run_records": [_row(i)]}) for i in range(n)]
    return [n for n in names if n]


def files_left(db: Path) -> list[str]:
    """Every file under the segments folder (folders themselves are not counted)."""
    return sorted(str(p.relative_to(seg.segments_dir(db))) for p in seg.segments_dir(db).rglob("*") if p.is_file())


def compact_process(db: Path, point: str = "none") -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-c", _COMPACT_AND_DIE, str(db), point], capture_output=True, text=True,
                          env=python_env(), cwd=ROOT, timeout=120)


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_at_any_point_of_compaction_loses_nothing_and_absorbs_nothing_twice(db: Path, point: str) -> None:
    Store(db).compact()  # the store exists; the segments come after
    write_segments(db)
    died = compact_process(db, point)
    assert died.returncode == -9, died.stderr
    assert compact_process(db).returncode == 0  # the next compaction, in a process of its own
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM run_records") == [(SEGMENTS, SEGMENTS)]
    assert query(db, "SELECT count(*) FROM absorbed_segments") == [(SEGMENTS,)]
    assert files_left(db) == []


def test_looptrace_compact_deletes_what_it_absorbed_before_it_exits(db: Path) -> None:
    Store(db).compact()
    write_segments(db)
    for _ in range(2):
        proc = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "compact", "--db", str(db)],
                              capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr
    assert files_left(db) == []
    assert query(db, "SELECT count(*) FROM run_records") == [(SEGMENTS,)]


def test_a_trash_left_by_an_earlier_version_is_emptied_when_nothing_is_pending(db: Path) -> None:
    Store(db).compact()
    names = write_segments(db)
    trash = seg.segments_dir(db) / seg.TRASH
    trash.mkdir()
    for n in names:  # what the old background deletion left when its process exited first
        (seg.segments_dir(db) / n).rename(trash / n)
    assert len(files_left(db)) == SEGMENTS
    assert compact_process(db).returncode == 0
    assert files_left(db) == []
    assert query(db, "SELECT count(*) FROM run_records") == [(0,)]  # trash is never absorbed
