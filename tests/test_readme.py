"""The README runs: every ```python block in README.md, as written, in a fresh process and folder.

The snippets start looptrace's local Messages API server themselves, so this is offline; a snippet
that names something undefined, needs a key or a network fails here before a user finds it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

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
    [code] = [b for b in BLOCKS if "AnthropicInstrumentor(" in b]
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
