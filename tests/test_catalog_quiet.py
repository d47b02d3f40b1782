"""A catalog ``collect`` that takes back a killed receiver's open trace prints no pyiceberg warning (issue 40).

Before writing a trace it takes back, the receiver removes whatever the catalog may hold of it
(``CatalogStore.delete_runs``): usually nothing, and pyiceberg warns ``Delete operation did not match
any records`` for every table each time, which reached the terminal of every ``collect --catalog``.
``tracer/store/iceberg/catalog.py`` filters that one warning at import; this test fails without it.

The receiver that acknowledged the trace and was killed is one that never stops (as in test_journal.py);
the one that takes the trace back is a real ``looptrace collect --catalog`` process on a SQLite catalog,
whose terminal (stderr) is what is read. In a process of its own, too, because pytest keeps each test's
warning filters apart from the filters a module sets at import.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from looptrace.tracer.ingest.otlp import OtlpReceiver
from looptrace.tracer.store.iceberg import CatalogStore
from looptrace.tracer.store.iceberg.journaled import JournaledCatalogWriter

from .conftest import PYTHON, ROOT, python_env
from .test_catalog import catalog_env
from .test_journal import _open_trace

pytest.importorskip("pyiceberg")

NAME = "quiet"


@pytest.mark.slow  # a real collect process on a catalog
def test_a_catalog_collect_taking_back_a_trace_warns_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = catalog_env(tmp_path / "catalog", NAME)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    journal = tmp_path / "journal.duckdb"
    killed = OtlpReceiver(f"iceberg:{NAME}", port=None, settle=60, journal_db=journal,
                          writer=JournaledCatalogWriter(CatalogStore(NAME), journal))
    assert killed.ingest(_open_trace())  # acknowledged and journaled, never written: its receiver is gone
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--catalog", NAME, "--journal",
                             str(journal), "--port", "0", "--grpc-port", "off", "--settle", "60",
                             "--diagnose-every", "0"], cwd=ROOT, env={**python_env(), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    before = ""
    while "listening on" not in (line := proc.stdout.readline()):
        assert line, f"collect ended before listening: {before}"
        before += line
    assert "3 spans of open traces taken back" in before, before
    proc.send_signal(signal.SIGTERM)  # stop: the trace taken back is written (incomplete) over what the catalog had
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert "1 incomplete" in out or "incomplete" in out, out
    assert "Delete operation did not match" not in err and "Warning" not in err, err
