"""Faults of the shared catalog, with real ``looptrace collect --catalog`` receivers on a real PostgreSQL.

- **The catalog's database restarts under load.** Two receivers are sent traces without pause while
  PostgreSQL stops, stays down, and starts again (a server of this test's own, so no other test
  sees it go). Every request is answered 200 from the receivers' journals meanwhile; once the
  database is back they write what they held, and every trace is in the catalog once.
- **The warehouse refuses files.** Its folders are made immutable (``chattr +i``: even root cannot
  create a file in them; ``chmod`` when not root): the receiver keeps answering, says why it cannot
  write, keeps the spans in its journal, and writes them once the warehouse takes files again.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from looptrace.tracer.export.source import open_source
from looptrace.tracer.ingest.otlp.journal import recover

from .conftest import PYTHON, ROOT, python_env, started_postgres
from .pg_server import PostgresServer
from .test_catalog import catalog_env
from .test_ingest import genai_agent, post, request_of

pytest.importorskip("pyiceberg")
pytest.importorskip("psycopg2")
pytestmark = pytest.mark.slow

NAME = "faults"
COUNTS = ("SELECT (SELECT count(*) FROM runs), (SELECT count(DISTINCT run_id) FROM run_records), "
          "(SELECT count(*) - count(DISTINCT (trace_id, span_id)) FROM spans), "
          "(SELECT count(*) FROM (SELECT run_id, step FROM step_records GROUP BY ALL HAVING count(*) > 1))")
WAIT = 120.0


def _collect(env: dict[str, str], journal: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--catalog", NAME, "--journal",
                             str(journal), "--port", "0", "--grpc-port", "off", "--settle", "0",
                             "--diagnose-every", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    while "listening on" not in (line := proc.stdout.readline()):
        assert line, "collect ended before listening: " + (proc.stderr.read() if proc.stderr else "")
    return proc, line.split("listening on ", 1)[1].split(",", 1)[0]


def _stop(procs: list[subprocess.Popen[str]]) -> list[tuple[str, str]]:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    return [proc.communicate(timeout=WAIT) for proc in procs]


def _counts() -> tuple[int, ...]:
    with open_source(f"iceberg:{NAME}").reader() as conn:
        return tuple(conn.execute(COUNTS).fetchone())


def _wait_for(runs: int, what: str) -> tuple[int, ...]:
    deadline = time.monotonic() + WAIT
    while True:
        try:
            got = _counts()
        except Exception:  # noqa: BLE001 - no tables yet
            got = (0, 0, 0, 0)
        if got[0] >= runs or time.monotonic() > deadline:
            assert got[0] == runs, f"{what}: {got[0]} runs in the catalog, expected {runs}"
            return got
        time.sleep(0.2)


def _trace() -> bytes:
    """A new finished GenAI agent trace (a new trace id each time): one run of 2 steps."""
    return request_of(lambda t: genai_agent(t, repeats=1)).SerializeToString()


class _Sender:
    """Sends a new trace to each receiver in turn, without pause, until stopped; every answer kept."""

    def __init__(self, urls: list[str]) -> None:
        self.urls, self.stop = urls, threading.Event()
        self.answers: list[int | str] = []
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.answers.append(post(self.urls[i % len(self.urls)], _trace())[0])
            except OSError as exc:  # no answer at all: kept, so the test says so
                self.answers.append(f"{type(exc).__name__}: {exc}")
            i += 1
            time.sleep(0.05)

    def __enter__(self) -> _Sender:
        self.thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        self.thread.join(WAIT)


@pytest.fixture
def own_postgres():  # noqa: ANN201 - a PostgresServer
    """A server for one test: this one is stopped and started under load."""
    yield from started_postgres()


def test_receivers_keep_acknowledging_through_a_postgres_restart_and_catch_up(
    tmp_path: Path, own_postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat_env = catalog_env(tmp_path / "catalog", NAME, own_postgres.create_database("catalog"))
    for k, v in cat_env.items():
        monkeypatch.setenv(k, v)
    env = {**python_env(), **cat_env}
    receivers = [_collect(env, tmp_path / f"journal-{i}.duckdb") for i in range(2)]
    try:
        with _Sender([url for _, url in receivers]) as sender:
            while len(sender.answers) < 6:
                time.sleep(0.05)
            _wait_for_some()  # the tables exist and commits are flowing
            own_postgres.stop()  # every session ended, commits in flight fail
            down_from = len(sender.answers)
            time.sleep(3.0)  # down: the receivers answer from their journals, their writes fail
            down_to = len(sender.answers)
            own_postgres.start()
            time.sleep(2.0)
        answers = list(sender.answers)
        assert down_to - down_from >= 5, (down_from, down_to)  # requests were answered while it was down
        assert answers == [200] * len(answers), answers  # every one of them acknowledged
        _wait_for(len(answers), "caught up after the restart")  # written while the receivers still run
    finally:
        outputs = _stop([proc for proc, _ in receivers])
    logged = "".join(err for _, err in outputs)
    for (proc, _), (out, err) in zip(receivers, outputs):
        assert proc.returncode == 0, out + err
    assert "(retrying)" in logged and "the catalog's database is unreachable" in logged, logged[-3000:]
    # Each trace once: no run, span or step twice.
    assert _counts() == (len(answers), len(answers), 0, 0), logged[-3000:]
    for i in range(2):
        assert recover(str(tmp_path / f"journal-{i}.duckdb")).spans == []  # nothing left open


def _wait_for_some() -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            if _counts()[0] >= 2:
                return
        except Exception:  # noqa: BLE001 - no tables yet
            pass
        time.sleep(0.2)
    raise AssertionError("no run reached the catalog")


def _refuse_writes(folder: Path) -> Callable[[], None]:
    """Make every folder under ``folder`` refuse new files; the function that undoes it."""
    folders = [str(p) for p in [folder, *folder.rglob("*")] if p.is_dir()]
    if os.geteuid() != 0:
        for f in folders:
            os.chmod(f, 0o555)
        return lambda: [os.chmod(f, 0o755) for f in folders] and None  # type: ignore[func-returns-value]
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr(1) (e2fsprogs): root ignores folder permissions")
    done = subprocess.run(["chattr", "+i", *folders], capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["chattr", "-i", *folders], capture_output=True)
        # Outside the project: a file system without the immutable flag, or no CAP_LINUX_IMMUTABLE.
        pytest.skip(f"cannot make the warehouse's folders immutable here: {done.stderr.strip()[:200]}")
    return lambda: subprocess.run(["chattr", "-i", *folders], check=True) and None  # type: ignore[func-returns-value]


def test_a_warehouse_that_refuses_files_keeps_the_spans_in_the_journal(
    tmp_path: Path, postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat_env = catalog_env(tmp_path / "catalog", NAME, postgres.create_database("refused"))
    for k, v in cat_env.items():
        monkeypatch.setenv(k, v)
    journal = tmp_path / "journal.duckdb"
    proc, url = _collect({**python_env(), **cat_env}, journal)
    allow = None
    try:
        assert post(url, _trace())[0] == 200
        _wait_for(1, "before the warehouse refused files")
        allow = _refuse_writes(tmp_path / "catalog" / "warehouse")
        held = [post(url, _trace())[0] for _ in range(3)]
        assert held == [200, 200, 200]  # acknowledged: durable in the journal
        time.sleep(2.0)  # the flusher tries, and fails
        assert _counts()[0] == 1
        assert len({s.trace_id for s in recover(str(journal)).spans}) == 3  # kept, open, in the journal
        allow()
        allow = None
        _wait_for(4, "once the warehouse took files again")
    finally:
        if allow is not None:
            allow()
        (out, err), = _stop([proc])
    assert proc.returncode == 0, out + err
    assert "(retrying)" in err and "the warehouse could not be read or written" in err, err[-3000:]
    assert _counts() == (4, 4, 0, 0)
    assert recover(str(journal)).spans == []
