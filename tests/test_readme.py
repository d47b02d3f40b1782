"""The README runs: every ```python block and every looptrace command line in README.md, as written.

The snippets start looptrace's local Messages API server themselves, so this is offline; a snippet
that names something undefined, needs a key or a network fails here before a user finds it.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from looptrace.loop.scripted import finish
from looptrace.loop.server import MessagesServer

from .conftest import PYTHON, ROOT, python_env, query

_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(markdown: str) -> list[str]:
    return _BLOCK.findall(markdown)


BLOCKS = python_blocks((ROOT / "README.md").read_text(encoding="utf-8"))


def test_the_readme_has_the_snippets_it_promises() -> None:
    assert len(BLOCKS) >= 3
    assert python_blocks("x\n```python\nprint(1)\n```\n```sh\nls\n```\n") == ["print(1)\n"]


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_block_runs_as_written(code: str, tmp_path: Path) -> None:
    env = python_env()
    env.pop("ANTHROPIC_API_KEY", None)  # offline, as a new user without a key
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    if "Guard(" in code:  # the guard stopped the stuck agent after its third identical call, and said so
        assert done.stdout.split()[:4] == ["max_repeats", "(1,", "2,", "3)"], done.stdout
        assert query(tmp_path / "traces.duckdb", "SELECT agent, status FROM runs") == [("stuck", "stagnated")]
        return
    if "Tracing(" in code:  # what it traced is in the store
        assert query(tmp_path / "traces.duckdb", "SELECT count(*) FROM runs WHERE status = 'ok'") == [(1,)]
    if "AnthropicInstrumentor(" in code:  # under the agent name it was given
        assert query(tmp_path / "traces.duckdb", "SELECT agent, n_steps FROM runs") == [("file-reader", 2)]
        # The first trace a user makes records what the tool returned, joined to its call by a real id.
        [(tool, observation, size, call_id)] = query(
            tmp_path / "traces.duckdb", "SELECT tool, observation, observation_bytes, tool_call_id FROM tool_calls")
        assert (tool, observation.strip(), size) == ("read", "hello", len(observation.encode()))
        assert call_id.startswith("toolu_"), call_id


@pytest.mark.slow
def test_looptrace_serve_lenient_answers_the_readmes_loop(tmp_path: Path) -> None:
    # Record the README's instrumented loop, serve that run, and run the same loop against it.
    [code] = [b for b in BLOCKS if "AnthropicInstrumentor(" in b and "Guard(" not in b]
    done = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, env=python_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    [(run_id,)] = query(tmp_path / "traces.duckdb", "SELECT run_id FROM runs")
    serve = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "serve", run_id, "--db", "traces.duckdb",
                              "--port", "0", "--lenient"], cwd=tmp_path, env=python_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line.startswith(f"serving run {run_id} (2 model calls) at http://127.0.0.1:"), line + serve.stderr.read()
        url = line.rsplit(" at ", 1)[1].strip()
        against = re.sub(r"(?m)^server = MessagesServer\(.*$",
                         f"import types; server = types.SimpleNamespace(base_url={url!r}, stop=lambda: None)", code)
        against = against.replace('Tracing("traces.duckdb")', 'Tracing("served.duckdb")')
        assert against != code
        again = subprocess.run([PYTHON, "-c", against], cwd=tmp_path, env=python_env(), capture_output=True,
                               text=True, timeout=120)
        assert again.returncode == 0, again.stderr[-3000:]  # no 400 from the served recording
    finally:
        serve.terminate()
        serve.communicate(timeout=30)
    assert query(tmp_path / "served.duckdb", "SELECT agent, status, n_steps FROM runs") == [("file-reader", "ok", 2)]


# -- every command line, after the quick start -------------------------------------------------------

_SH = re.compile(r"^```sh\n(.*?)^```$", re.S | re.M)
# Lines that serve until stopped. They run as written plus ``--port 0`` (the last --port wins): the
# server binds a port the kernel chooses and prints its URL, so the walk-through never needs 8008 or
# 8089 free (issue 39: it skipped when either was taken). The defaults themselves are checked below.
_SERVES = ("--web", " serve ")
_URL = re.compile(r"http://127\.0\.0\.1:\d+")


def command_lines(markdown: str) -> list[str]:
    """Every line of the README's ```sh blocks that runs looptrace, its comment dropped."""
    lines = [line.split("  #")[0].strip() for block in _SH.findall(markdown) for line in block.splitlines()]
    return [line for line in lines if line.startswith(("looptrace ", ".venv/bin/looptrace "))]


def _hints(demo_output: str) -> list[str]:
    after = demo_output.split("Next:\n", 1)[1]
    return [line.strip() for line in after.splitlines() if line.startswith("  ")]


def _run_served(line: str, cwd: Path, env: dict[str, str]) -> None:
    """``line`` on a port of its own: ready when it printed its URL and that URL answers."""
    proc = subprocess.Popen(["bash", "-c", f"{line} --port 0"], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None
        said = ""
        while not (url := _URL.search(out := proc.stdout.readline())):
            said += out
            assert out, (line, said)  # it ended, or closed its output, without serving
        with urllib.request.urlopen(url.group(0), timeout=30) as answer:  # any HTTP answer: it serves
            assert answer.status < 500
    except urllib.error.HTTPError as exc:
        assert exc.code < 500, (line, exc)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=30)


def test_the_readmes_default_ports_are_the_commands_defaults() -> None:
    from looptrace.viewer.web import DEFAULT_PORT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"--web              # the viewer in a browser, http://127.0.0.1:{DEFAULT_PORT}" in readme
    assert DEFAULT_PORT == 8008 and "--port 8089" in readme


def _read(master: int, timeout: float) -> bytes | None:
    """What the terminal shows next (b"" if nothing within ``timeout``; None once the viewer closed it)."""
    ready, _, _ = select.select([master], [], [], timeout)
    if not ready:
        return b""
    try:
        return os.read(master, 65536)
    except OSError:  # EIO: every process holding the terminal has closed it
        return None


def _run_tui(line: str, cwd: Path, env: dict[str, str], *, q_at_once: bool = False) -> None:
    """The viewer in a real pseudo-terminal: it draws the demo's runs, and `q` quits it with status 0.

    With ``q_at_once``, `q` is typed before the viewer has started, as a user quick on the keys (or on a
    loaded machine) does: it must quit all the same. It used to go into the runs screen's filter box,
    which Textual focused as the screen was composed, until the table took the focus (issue 39).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    if q_at_once:
        os.write(master, b"q")  # waiting in the terminal's input before the viewer reads it
    proc = subprocess.Popen(["bash", "-c", line], cwd=cwd, env={**env, "TERM": "xterm-256color"},
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 60
    try:
        while not q_at_once and b"demo-" not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen[-2000:]
            seen += _read(master, 0.5) or b""
        if not q_at_once:
            os.write(master, b"q")
        # The terminal is read until the viewer exits, as a real one is. The walk-through used to stop
        # reading at `q`: a repaint after it (the 2 s refresh) filled the pty's buffer, Textual's writer
        # thread blocked in write() and the exit waited on it for ever (4 of ~20 loaded full runs).
        deadline = time.monotonic() + 60
        while proc.poll() is None:
            assert time.monotonic() < deadline, f"no exit within 60 s of q: {seen[-2000:]!r}"
            out = _read(master, 0.5)
            if out is None:
                break
            seen += out
        assert proc.wait(timeout=max(1.0, deadline - time.monotonic())) == 0, seen[-2000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        os.close(master)


@pytest.mark.slow
def test_every_readme_command_and_demo_hint_runs_as_written_after_the_quick_start(tmp_path: Path) -> None:
    venv = Path(sys.prefix)
    if not (venv / "bin" / "looptrace").exists():
        pytest.skip(f"{venv} has no looptrace script: the tests are not running from the project's virtualenv")
    (tmp_path / ".venv").symlink_to(venv)  # the folder `make demo` leaves behind
    env = python_env()
    env.pop("ANTHROPIC_API_KEY", None)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != venv / "bin")

    def sh(line: str, **extra: str) -> str:
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env={**env, **extra}, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
        return done.stdout

    # The quick start: `make demo` after its install is this one line.
    recipe = (ROOT / "Makefile").read_text().split("\ndemo: $(STAMP)\n", 1)[1].splitlines()[0].strip()
    assert recipe == "$(BIN)/looptrace demo --db $(DB)"
    output = sh(".venv/bin/looptrace demo --db demo.duckdb")
    hints = _hints(output)
    assert len(hints) == 4 and all(h.startswith(".venv/bin/looptrace ") for h in hints), hints
    for line in hints:
        if line.split()[1] == "view":
            _run_tui(line, tmp_path, env)
        else:
            sh(line)

    # The hints in error messages run too: a run that is not there, a store that is not there.
    for line, hint_of in ((".venv/bin/looptrace report nosuchrun --db demo.duckdb -o x.html", "list them with: "),
                          (".venv/bin/looptrace view nowhere.duckdb", "create one with: ")):
        failed = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                                timeout=120, stdin=subprocess.DEVNULL)
        assert failed.returncode == 1 and hint_of in failed.stderr, failed.stderr
        hint = failed.stderr.split(hint_of, 1)[1].strip().removesuffix(")")
        assert hint.startswith(".venv/bin/looptrace ") and "--db" in hint, hint
        shown = sh(hint)
        assert ("run_id" in shown) if "report" in line else (tmp_path / "nowhere.duckdb").exists()

    # Then the README, with the virtualenv active as it says, placeholders filled in.
    active = {"PATH": os.pathsep.join([str(tmp_path / ".venv" / "bin"), env["PATH"]]), "VIRTUAL_ENV": str(venv)}
    [(cycle,)] = query(tmp_path / "demo.duckdb", "SELECT run_id FROM runs WHERE agent = 'demo-cycle' "
                                                "AND replay_of IS NULL AND forked_from IS NULL")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "chat.json").write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}))
    (tmp_path / "more.traj.gz").write_bytes(gzip.compress(json.dumps({"history": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}).encode()))
    lines = command_lines((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(lines) >= 15
    ran: set[str] = set()
    quick = False
    with MessagesServer([finish("done")] * 100) as model:
        for line in lines:
            filled = (line.replace("RUN_ID", cycle[:12]).replace("RUN_A", cycle[:12]).replace("URL", model.base_url))
            if filled in ran:  # the same line again, on the same store (`analyze` twice): it ran as written
                continue
            ran.add(filled)
            if "RUN_B" in filled:
                [(replay,)] = query(tmp_path / "demo.duckdb", "SELECT run_id FROM runs WHERE replay_of = ? "
                                    "ORDER BY started_at LIMIT 1", [cycle])
                filled = filled.replace("RUN_B", replay[:12])
            if any(flag in f" {filled} " for flag in _SERVES):
                _run_served(filled, tmp_path, {**env, **active})
            elif filled.split()[1] == "view":
                # A line the demo's hints showed drawing the runs is started with q typed at once.
                _run_tui(filled, tmp_path, {**env, **active}, q_at_once=filled in hints)
                quick |= filled in hints
            else:
                sh(filled, **active)
    assert (tmp_path / "report" / "index.html").exists() and (tmp_path / "tests" / "test_run.py").exists()
    assert quick, "no README view line is a demo hint: nothing pressed q as the viewer started"
