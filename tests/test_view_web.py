"""`looptrace view --web` in a real browser: textual-serve serves the same viewer, and Chromium
(headless, driven by Playwright, the system's chromium) draws the runs table.

xterm.js draws the terminal on a canvas, so the page's DOM holds no text to read. What the browser
rendered is checked two ways: the websocket frames the page received carry the runs table (agent
names, the diagnosis column) and the text layer the page drew has as many lines of text as the
table has rows, and more.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from looptrace.viewer.web import is_loopback, viewer_command

from .browser import chromium
from .conftest import PYTHON, ROOT, python_env, query

pytestmark = pytest.mark.slow

# Pixel rows of the canvas text layer that hold drawn glyphs, grouped into lines of text.
_TEXT_LINES_JS = """
() => {
  const c = document.querySelector("canvas.xterm-text-layer");
  if (!c) return -1;
  const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  let lines = 0, inLine = false;
  for (let y = 0; y < c.height; y++) {
    let ink = false;
    const r0 = (y * c.width) * 4;  // a row with glyphs is not one colour from edge to edge
    for (let x = 1; x < c.width && !ink; x++) {
      const i = r0 + x * 4;
      ink = Math.abs(d[i] - d[r0]) + Math.abs(d[i + 1] - d[r0 + 1]) + Math.abs(d[i + 2] - d[r0 + 2])
            + Math.abs(d[i + 3] - d[r0 + 3]) > 60;
    }
    if (ink && !inLine) lines++;
    inLine = ink;
  }
  return lines;
}
"""


class Served(NamedTuple):
    url: str
    pid: int  # the `looptrace view --web` process, whose listening socket one test reads
    port: int


@pytest.fixture
def served(demo: Path) -> Iterator[Served]:
    # Port 0: the viewer binds a port the kernel chooses and names it in its first line.
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "view", str(demo), "--web", "--port", "0",
                             "--refresh", "0"], cwd=ROOT, env=python_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        said = ""
        while " on http://127.0.0.1:" not in (line := proc.stdout.readline()):
            said += line
            assert line, said
        # textual-serve logs to the same pipe while it serves: read it, or a full pipe stops the server.
        threading.Thread(target=proc.stdout.read, daemon=True).start()
        url = line.split(" on ", 1)[1].split()[0] + "/"
        port = int(url.rsplit(":", 1)[1].strip("/"))
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield Served(url, proc.pid, port)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_the_browser_draws_the_runs_table(served: Served, demo: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is in the test extra")
    # The agent column is ~22 characters wide: a longer name is cut with an ellipsis.
    agents = {a[:16] for (a,) in query(demo, "SELECT agent FROM runs WHERE parent_run_id IS NULL")}
    received: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.on("websocket", lambda ws: ws.on(
                "framereceived", lambda f: received.append(f if isinstance(f, str) else f.decode("utf-8", "replace"))))
            page.goto(served.url)
            deadline = time.monotonic() + 60
            while not all(a in "".join(received) for a in agents) and time.monotonic() < deadline:
                page.wait_for_timeout(250)
            page.wait_for_timeout(1000)  # the last frames drawn
            lines = page.evaluate(_TEXT_LINES_JS)
        finally:
            browser.close()
    shown = "".join(received)
    assert all(a in shown for a in agents), sorted(a for a in agents if a not in shown)
    assert "diagnosis" in shown and "cap_hit" in shown
    assert lines >= len(agents) + 3, lines  # title, filter, header and a line per run were drawn


def _listening(pid: int, port: int) -> list[str]:
    """The local addresses of the sockets process ``pid`` listens on at ``port``, as the kernel has them
    (/proc/net/tcp and tcp6, matched to the process's own file descriptors by inode)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed while we looked
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port and fields[9] in inodes:  # 0A: LISTEN
                raw = bytes.fromhex(address)  # each 32-bit word in host (little-endian) order
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.append(str(ipaddress.ip_address(words)))
    return found


def test_web_binds_to_loopback_by_default_and_runs_the_same_viewer(served: Served, tmp_path: Path) -> None:
    # `served` started `looptrace view --web --port 0` without --host: the socket it listens on is the claim.
    addresses = _listening(served.pid, served.port)
    assert addresses and all(ipaddress.ip_address(a).is_loopback for a in addresses), addresses
    # The warning for other hosts hangs on is_loopback.
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")
    command = viewer_command(tmp_path / "a b.duckdb", 0)
    assert command.endswith(f"-m looptrace.viewer '{tmp_path / 'a b.duckdb'}' --refresh 0")
    help_text = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "view", "--help"], capture_output=True,
                               text=True, cwd=ROOT, env=python_env(), timeout=60).stdout
    assert "--web" in help_text and "default 127.0.0.1" in help_text
