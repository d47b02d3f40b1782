"""Headless Chromium for the browser tests: the system's `chromium` (Debian), no network, no profile.

`make .venv/.installed` installs it with apt-get where it can; where it cannot, the tests that need it
skip with a message saying so (never a silent pass).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest

__all__ = ["chromium", "dump_dom"]

_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on this machine: install Debian's chromium (apt-get install chromium) "
                    "to run the browser tests")
    return path


def dump_dom(url: str, *, offline: bool = True, wait_ms: int = 0, timeout: float = 90.0) -> str:
    """The DOM as the browser has it after loading ``url`` (scripts run), serialised."""
    with tempfile.TemporaryDirectory(prefix="looptrace-chromium-") as profile:
        args = [chromium(), *_FLAGS, f"--user-data-dir={profile}"]
        if offline:  # any host name fails to resolve: a page that reaches for the network gets nothing
            args.append("--host-resolver-rules=MAP * ~NOTFOUND")
        if wait_ms:
            args.append(f"--virtual-time-budget={wait_ms}")
        done = subprocess.run([*args, "--dump-dom", url], capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
