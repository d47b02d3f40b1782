"""A durable ``collect --catalog``: the journal in a local DuckDB file, each run in the catalog once.

Each test runs on a SQLite catalog and on a PostgreSQL one (a real server: ``conftest.postgres``).
A real ``collect --catalog`` process acknowledges the spans of an open trace and is killed with
SIGKILL; the next one on the same journal takes them back and finishes the trace into the catalog.
Then the harder moment: a trace committed to the catalog but not closed in the journal (the journal
write fails right after the catalog commit, as a kill there would leave it) is written again by
the next receiver over what the catalog has, not next to it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from looptrace.tracer.export.source import open_source
from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.journal import open_traces, recover
from looptrace.tracer.store.iceberg import CatalogStore
from looptrace.tracer.store.iceberg.journaled import JournaledCatalogWriter

from .conftest import PYTHON, ROOT, python_env
from .test_catalog import catalog_env, catalog_uri  # noqa: F401 - a fixture: each test on SQLite and PostgreSQL
from .test_ingest import genai_agent, post, request_of
from .test_journal import _open_trace, spans_of

pytest.importorskip("pyiceberg")

NAME = "journaled"
COUNTS = ("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM run_records), "
          "(SELECT count(*) FROM step_records), (SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM spans)")


def _collect(env: dict[str, str], journal: Path) -> tuple[subprocess.Popen[str], str, str]:
    """A started collect, its URL, and what it printed before listening."""
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--catalog", NAME, "--journal",
                             str(journal), "--port", "0", "--grpc-port", "off", "--settle", "60",
                             "--diagnose-every", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    before = ""
    while "listening on" not in (line := proc.stdout.readline()):
        assert line, f"collect ended before listening: {before}"
        before += line
    return proc, line.split("listening on ", 1)[1].split(",", 1)[0], before


def _counts() -> tuple[int, ...]:
    with open_source(f"iceberg:{NAME}").reader() as conn:
        return tuple(conn.execute(COUNTS).fetchone())


@pytest.mark.slow  # three real collect processes
# On the deployment's catalog only: the journal is the same over SQLite (the other two tests run on both).
@pytest.mark.parametrize("catalog_uri", ["postgres"], indirect=True)
def test_a_killed_catalog_collect_loses_no_acknowledged_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             catalog_uri: str | None) -> None:
    cat_env = catalog_env(tmp_path / "catalog", NAME, catalog_uri)
    env, journal = {**python_env(), **cat_env}, tmp_path / "journal.duckdb"
    request = request_of(lambda t: genai_agent(t, repeats=1, end_root=False)).SerializeToString()
    first, url, _ = _collect(env, journal)
    try:
        assert post(url, request)[0] == 200  # acknowledged: the trace is open, its root never ended
    finally:
        first.kill()
        first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert len(recover(str(journal)).spans) == 3  # durable before the 200, in the local journal

    second, url, taken = _collect(env, journal)
    assert "3 spans of open traces taken back" in taken, taken
    assert post(url, request)[0] == 200  # the client retries the request whose answer it may have lost
    second.send_signal(signal.SIGTERM)  # stop: the open trace is written, as incomplete
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, out + err
    for k, v in cat_env.items():
        monkeypatch.setenv(k, v)
    assert _counts() == (1, 1, 2, 0)  # the run, its 2 steps, each span once
    assert recover(str(journal)).spans == []  # closed in the journal: a third receiver takes nothing back

    third, url, taken = _collect(env, journal)
    # A late retry of spans already written is dropped, not stored again. (It also lets collect reach its
    # wait: a SIGTERM in the instant between its "listening" line and that wait ends it with 130.)
    assert post(url, request)[0] == 200
    third.send_signal(signal.SIGTERM)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0 and "taken back" not in taken, taken + out
    assert _counts() == (1, 1, 2, 0)


def test_a_trace_in_the_catalog_but_open_in_the_journal_is_written_again_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_uri: str | None
) -> None:
    for k, v in catalog_env(tmp_path / "catalog", NAME, catalog_uri).items():
        monkeypatch.setenv(k, v)
    journal = tmp_path / "journal.duckdb"
    segments = Path(f"{journal}.segments")
    receiver = OtlpReceiver(f"iceberg:{NAME}", port=None, settle=60, journal_db=journal,
                            writer=JournaledCatalogWriter(CatalogStore(NAME), journal))
    with receiver:
        assert receiver.ingest(_open_trace())  # journaled
        os.rename(segments, f"{segments}-moved")
        segments.write_text("a file where the journal's segments go")  # every journal write fails now
    # stop() wrote the trace to the catalog; closing it in the journal failed: it is still open there.
    assert _counts() == (1, 1, 2, 0)
    segments.unlink()
    os.rename(f"{segments}-moved", segments)
    assert len(recover(str(journal)).spans) == 3

    writer = JournaledCatalogWriter(CatalogStore(NAME), journal, retaken=open_traces(str(journal)))
    with OtlpReceiver(f"iceberg:{NAME}", port=None, settle=60, journal_db=journal, writer=writer) as again:
        assert again.stats.recovered_spans == 3
    assert writer.rewritten == 1
    assert _counts() == (1, 1, 2, 0)  # replaced, not added
    assert recover(str(journal)).spans == []


class _HeldWriter:
    """The real catalog writer, whose first write waits until ``release`` is set: a slow commit."""

    def __init__(self, inner: JournaledCatalogWriter) -> None:
        self.inner, self.entered, self.release = inner, threading.Event(), threading.Event()

    def write(self, rows: Mapping[str, Any]) -> str | None:
        self.entered.set()
        self.release.wait(120)
        return self.inner.write(rows)


def test_a_catalog_receiver_answers_while_its_catalog_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              catalog_uri: str | None) -> None:
    """A request waits for its journal write, never for a catalog commit (which took every request's
    turn under the lock, so that under load clients timed out and runs went missing). Spans that come
    for a trace while it is being written are placed under it once it is: a resend is dropped, a late
    span is added, nothing is written twice."""
    for k, v in catalog_env(tmp_path / "catalog", NAME, catalog_uri).items():
        monkeypatch.setenv(k, v)
    journal = tmp_path / "journal.duckdb"
    writer = _HeldWriter(JournaledCatalogWriter(CatalogStore(NAME), journal))
    first = spans_of(request_of(lambda t: genai_agent(t, repeats=2)))
    late = next(s for s in first if s.name.startswith("execute_tool"))
    first_but_late = [s for s in first if s is not late]
    second = spans_of(request_of(lambda t: genai_agent(t, repeats=1)))
    with OtlpReceiver(f"iceberg:{NAME}", port=None, settle=0, journal_db=journal, writer=writer) as receiver:
        try:
            answers: list[bool] = []

            def send() -> None:
                answers.append(receiver.ingest(first_but_late))  # complete (its root is in): due at once
                if writer.entered.wait(60):  # the flusher is committing it now, and stays held there
                    answers.extend(receiver.ingest(spans) for spans in (second, first_but_late, [late]))

            during = threading.Thread(target=send)
            during.start()
            during.join(60)
            # Every request answered while the commit is held (before: the first waited for it).
            assert not during.is_alive() and answers == [True, True, True, True] and writer.entered.is_set()
        finally:
            writer.release.set()
    assert receiver.stats.duplicate_spans == len(first_but_late) and receiver.stats.late_spans == 1
    with open_source(f"iceberg:{NAME}").reader() as conn:
        spans = conn.execute("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").fetchone()
        records = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM run_records").fetchone()
        late_run = conn.execute("SELECT count(*) FROM spans WHERE span_id = ? AND run_id = ("
                                "SELECT run_id FROM spans WHERE span_id = ?)", [late.span_id,
                                                                               first[0].span_id]).fetchone()
    assert spans == (len(first) + len(second),) * 2
    assert records == (2, 2)
    assert late_run == (1,)  # the late span is under its trace's run
    assert recover(str(journal)).spans == []


class _CutMidWrite:
    """The real catalog, whose next append lands its ``spans`` and then loses the connection, as one
    in flight when PostgreSQL stops; ``lagging`` is set from then until the test clears it: while it
    is, the receiver's journal does not list the trace yet (its group commit is still on its way)."""

    def __init__(self, store: CatalogStore) -> None:
        self.store, self.cut, self.lagging = store, True, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def write(self, rows: Mapping[str, Any], tables: Any = None) -> str | None:
        if not self.cut:
            return self.store.write(rows, tables)
        self.cut, self.lagging = False, True
        self.store.write({"spans": rows["spans"]}, tables)  # landed: the commit's answer is what was lost
        from looptrace.tracer.store.iceberg.errors import CatalogUnavailable

        raise CatalogUnavailable("the catalog's database is unreachable (test: the connection was cut mid-write)")


def test_a_write_cut_before_the_journal_lists_its_trace_is_written_over_not_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, catalog_uri: str | None
) -> None:
    """The flusher may take a complete trace before the group commit that journals its spans has
    landed. If that write is cut after some of its tables committed, the journal read right at the
    failure does not list the trace, so the retry must not trust that read: it reads the journal
    again when it writes the trace again, and writes over what landed (the flake of the PostgreSQL
    restart test, tests/test_catalog_faults.py, could be this)."""
    for k, v in catalog_env(tmp_path / "catalog", NAME, catalog_uri).items():
        monkeypatch.setenv(k, v)
    journal = tmp_path / "journal.duckdb"
    catalog = _CutMidWrite(CatalogStore(NAME))
    writer = JournaledCatalogWriter(catalog, journal,  # type: ignore[arg-type]
                                    still_open=lambda: set() if catalog.lagging else open_traces(str(journal)))
    with OtlpReceiver(f"iceberg:{NAME}", port=None, settle=60, journal_db=journal, writer=writer) as receiver:
        assert receiver.ingest(spans_of(request_of(lambda t: genai_agent(t, repeats=1))))  # journaled, held
        assert not receiver.flush()  # cut: its spans landed, the rest did not; the trace is held again
        catalog.lagging = False  # the journal's commit has landed meanwhile
        assert receiver.flush()
    assert _counts() == (1, 1, 2, 0)  # the spans written over, not next to the ones that landed
    assert recover(str(journal)).spans == []


def test_a_journal_that_cannot_be_read_when_the_trace_is_written_again_holds_the_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a trace of a cut write is journaled (to be written over) is not guessed: while the
    journal cannot be read, that write fails as an OSError (the receiver holds the trace and tries
    again) and adds nothing."""
    for k, v in catalog_env(tmp_path / "catalog", NAME, None).items():
        monkeypatch.setenv(k, v)
    journal = tmp_path / "journal.duckdb"
    catalog, unreadable = _CutMidWrite(CatalogStore(NAME)), [True]

    def still_open() -> set[str]:
        if unreadable[0]:
            raise OSError("the journal cannot be read now (test)")
        return open_traces(str(journal), strict=True)

    writer = JournaledCatalogWriter(catalog, journal, still_open=still_open)  # type: ignore[arg-type]
    with OtlpReceiver(f"iceberg:{NAME}", port=None, settle=60, journal_db=journal, writer=writer) as receiver:
        assert receiver.ingest(spans_of(request_of(lambda t: genai_agent(t, repeats=1))))
        assert not receiver.flush()  # cut after its spans landed
        assert not receiver.flush()  # the journal cannot say: nothing written
        assert receiver.stats.last_error is not None and "cannot be read" in receiver.stats.last_error
        assert _counts()[0] == 0
        unreadable[0] = False
        assert receiver.flush()
    assert _counts() == (1, 1, 2, 0)
