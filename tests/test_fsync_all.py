"""``segments.fsync_all``: a segment's files and folder are fsynced together (one journal commit
instead of one each); a failure in any helper thread reaches the writer, which then keeps nothing."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from looptrace.tracer.store.segments import SegmentWriter, fsync_all, list_segments, segments_dir


def test_every_path_is_synced_and_a_failure_in_a_helper_thread_is_raised(tmp_path: Path) -> None:
    files = [tmp_path / f"t{i}.parquet" for i in range(4)]
    for f in files:
        f.write_bytes(b"x" * 1000)
    fsync_all([*files, tmp_path])  # no error: every path exists
    with pytest.raises(FileNotFoundError):
        fsync_all([files[0], tmp_path / "gone.parquet", tmp_path])  # the missing one is a helper's


def test_helper_threads_leave_sigterm_to_the_main_thread(tmp_path: Path) -> None:
    """The helpers are started with SIGINT/SIGTERM blocked (issue 24: a signal taken by a tracer
    thread left the main thread waiting forever); the writer's own mask is unchanged after."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen: list[set[signal.Signals]] = []
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        if self.name == "looptrace-fsync":
            seen.append(set(signal.pthread_sigmask(signal.SIG_BLOCK, [])))
        original(self)

    threading.Thread.run = run  # type: ignore[method-assign]
    try:
        fsync_all([tmp_path, tmp_path, tmp_path])
    finally:
        threading.Thread.run = original  # type: ignore[method-assign]
    assert len(seen) == 2 and all({signal.SIGINT, signal.SIGTERM} <= s for s in seen)
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_a_failed_sync_leaves_no_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.duckdb"
    writer = SegmentWriter(db)
    assert writer.write({"run_records": [{"run_id": "r1", "agent": "a"}]}) is not None
    assert len(list_segments(segments_dir(db))) == 1
    monkeypatch.setattr("looptrace.tracer.store.segments.fsync_all", _failing)
    with pytest.raises(OSError, match="disk"):
        writer.write({"run_records": [{"run_id": "r2", "agent": "a"}]})
    assert len(list_segments(segments_dir(db))) == 1
    assert not [p for p in segments_dir(db).iterdir() if p.name.startswith(".tmp-")]


def _failing(paths: list[Path]) -> None:
    raise OSError("disk failed")


def test_a_segment_absorbed_before_its_sync_is_still_a_successful_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A segment is renamed into place before it is synced, so a reader may absorb and delete it in
    between: the sync goes through descriptors, the write succeeds, and the rows are in the store once."""
    from looptrace.tracer.store import Store
    from looptrace.tracer.store import segments

    db = tmp_path / "s.duckdb"
    writer = SegmentWriter(db)
    real = segments.fsync_all
    absorbed: list[int] = []

    def absorb_first(paths: list[Path | int]) -> None:
        absorbed.append(Store(db).compact())  # a reader in another process, between rename and sync
        assert not list_segments(segments_dir(db))
        real(paths)

    monkeypatch.setattr("looptrace.tracer.store.segments.fsync_all", absorb_first)
    row = {"run_id": "r1", "agent": "a", "recorded_at": 1_700_000_000_000_000}
    assert writer.write({"run_records": [row]}) is not None
    assert absorbed == [1]
    with Store(db).reader(locked_down=False) as conn:
        assert conn.execute("SELECT run_id FROM run_records").fetchall() == [("r1",)]
