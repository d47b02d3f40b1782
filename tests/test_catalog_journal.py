"""A durable ``collect --catalog``: the journal in a local DuckDB file, each run in the catalog once.

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
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from looptrace.tracer.export.source import open_source
from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.ingest.otlp.journal import open_traces, recover
from looptrace.tracer.store.iceberg import CatalogStore
from looptrace.tracer.store.iceberg.journaled import JournaledCatalogWriter

from .conftest import PYTHON, ROOT, python_env
from .test_catalog import catalog_env
from .test_ingest import genai_agent, post, request_of
from .test_journal import _open_trace

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
def test_a_killed_catalog_collect_loses_no_acknowledged_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat_env = catalog_env(tmp_path / "catalog", NAME)
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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in catalog_env(tmp_path / "catalog", NAME).items():
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
