"""Progress bars: on a terminal once work passes the threshold, never in a pipe or in CI."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from pathlib import Path

from looptrace.tracer.cli.progress import Progress

from .conftest import PYTHON, ROOT, python_env
from .test_manual_api import example_agent


def _on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run looptrace with stderr on a pseudo-terminal; its exit status and what the terminal got."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", *args], cwd=ROOT, env={**python_env(), **env},
                            stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    proc.communicate(timeout=60)
    os.close(master)
    return proc.returncode, seen.decode(errors="replace")


def test_export_compact_and_analyze_show_progress_on_a_terminal_only(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    example_agent(db)
    now = {"LOOPTRACE_PROGRESS_AFTER": "0", "CI": ""}  # show at once: the work here is quick
    code, terminal = _on_a_terminal(["export", "--db", str(db), "--parquet", str(tmp_path / "out")], now)
    assert code == 0 and "exporting" in terminal
    code, terminal = _on_a_terminal(["compact", "--db", str(db)], now)
    assert code == 0 and "compacting" in terminal
    code, terminal = _on_a_terminal(["analyze", "--db", str(db)], now)
    assert code == 0 and "analysing" in terminal
    # In CI, or in a pipe, nothing but the result.
    code, terminal = _on_a_terminal(["compact", "--db", str(db)], {**now, "CI": "1"})
    assert code == 0 and "compacting" not in terminal
    piped = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "compact", "--db", str(db)], cwd=ROOT,
                           env={**python_env(), **now}, capture_output=True, text=True, timeout=60)
    assert piped.returncode == 0 and piped.stderr == ""


class _Tty:
    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text += s
        return len(s)

    def flush(self) -> None:
        pass


def test_quick_work_shows_nothing_and_slow_work_a_bar(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("CI", raising=False)
    quick = _Tty()
    with Progress("quick", total=3, out=quick, after=30) as p:  # work that ends long before its `after`
        p.advance()
    assert quick.text == ""
    # Work still going past its `after` gets a bar while it runs (waited for, up to a generous 30 s: how
    # soon the bar appears is a timing claim, which `make bench` prints as a ratio to `after`).
    slow = _Tty()
    with Progress("slow", total=3, out=slow, after=0.05) as p:
        deadline = time.monotonic() + 30
        while "slow" not in slow.text and time.monotonic() < deadline:
            time.sleep(0.01)
        shown_while_running = "slow" in slow.text
        p.advance(3)
    assert shown_while_running
