"""Errors in looptrace's own words: no library's traceback, log line or advice reaches the user.

As a newcomer met them: ``view --web`` on a taken port printed textual-serve's banner and then an
aiohttp traceback; a second ``collect`` printed gRPC's raw ``add_port.cc`` log line before its own
warning; ``analyze --ray auto`` with no cluster told the user to set an ``--address`` flag that
looptrace does not have. Each runs here through the real CLI, on a real port.
"""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .conftest import PYTHON, ROOT, python_env
from .test_catalog import catalog_env, cli


def looptrace(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", *args], capture_output=True, text=True,
                          env={**python_env(), **(env or {})}, cwd=cwd, timeout=180)


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other.getsockname()[1]


def test_view_web_on_a_taken_port_says_so_in_one_line(demo: Path, tmp_path: Path, taken_port: int) -> None:
    done = looptrace("view", str(demo), "--web", "--port", str(taken_port), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"error: cannot serve on 127.0.0.1:{taken_port}: the port is taken "
                                   "(another --web viewer? pick another with --port)")
    assert "Serving" not in done.stdout and "Traceback" not in done.stderr  # no banner for a server that never ran


def test_collect_on_a_taken_grpc_port_prints_no_grpc_log_line(tmp_path: Path, taken_port: int) -> None:
    done = looptrace("collect", "--db", "s.duckdb", "--port", "0", "--grpc-port", str(taken_port), cwd=tmp_path)
    assert done.returncode != 0
    assert done.stderr.strip() == (f"error: cannot listen for OTLP/gRPC on 127.0.0.1:{taken_port}: "
                                   "Address already in use"), done.stderr
    assert "add_port.cc" not in done.stderr


def _start_collect(env: dict[str, str], *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([PYTHON, "-m", "looptrace.tracer.cli", "collect", "--port", "0", "--settle", "0",
                             "--diagnose-every", "0", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on http://127.0.0.1:" in line, line + (proc.stderr.read() if proc.stderr else "")
    port = urlsplit(line.split("listening on ", 1)[1].split(",", 1)[0]).port
    return proc, f"http://127.0.0.1:{port}"


def test_a_second_collect_on_the_default_grpc_port_warns_without_grpcs_log(tmp_path: Path) -> None:
    """The first receiver has the gRPC port; the second serves HTTP only and says so once."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        grpc_port = free.getsockname()[1]
    first, _ = _start_collect(python_env(), "--db", str(tmp_path / "a.duckdb"), "--grpc-port", str(grpc_port))
    try:
        second = looptrace("collect", "--db", "b.duckdb", "--port", "0", "--grpc-port", str(grpc_port), cwd=tmp_path)
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert second.returncode != 0 and "add_port.cc" not in second.stderr, second.stderr
    assert second.stderr.strip().startswith(f"error: cannot listen for OTLP/gRPC on 127.0.0.1:{grpc_port}")


@pytest.mark.slow
@pytest.mark.xdist_group("ray")  # never beside the suite's own Ray clusters, which would make it skip
def test_analyze_ray_auto_with_no_cluster_gives_looptraces_advice(demo: Path, tmp_path: Path) -> None:
    pytest.importorskip("pyiceberg")
    pytest.importorskip("ray")
    from ray._private.services import find_gcs_addresses

    if find_gcs_addresses():  # Ray's "auto" joins any cluster whose processes run on this machine
        pytest.skip("a Ray cluster runs on this machine (another test's?): --ray auto would join it")
    env = {**catalog_env(tmp_path / "catalog", "noray"), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_TMPDIR": str(tmp_path / "ray")}  # no `ray start` cluster is found there, whatever runs beside
    cli("export", "--db", str(demo), "--catalog", "noray", env=env)
    done = looptrace("analyze", "--catalog", "noray", "--ray", "auto", cwd=tmp_path,
                     env={**env, "RAY_ADDRESS": ""})
    assert done.returncode == 1, done.stdout
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("error: --ray auto: no Ray cluster found") and "--ray ADDRESS" in lines[-1], done.stderr
    assert "--address" not in done.stderr and "Traceback" not in done.stderr
