"""Paths are data, not secrets: a run traced from a working directory keeps its paths.

``PWD`` holds "pwd" (a password's abbreviation), so its value, the working directory, was redacted
from every text: each file path an agent touched became ``[REDACTED:env:PWD]/src/main.py``, and an
import's ``runs.source`` too. Names of places (``*_DIR``, ``*_PATH``, ``*_FILE``; ``PWD`` and
``OLDPWD`` holding a path) are kept; every secret of the corpus still goes, through the same runs.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from looptrace.loop.agent import Agent
from looptrace.loop.model import AnthropicModel, RetryPolicy
from looptrace.loop.scripted import Script, act, finish
from looptrace.loop.server import MessagesServer
from looptrace.loop.tools import Tool
from looptrace.tracer import Tracing
from looptrace.tracer.sink import Redactor
from looptrace.tracer.sink.rules import is_secret_key, is_secret_under

from .conftest import PYTHON, python_env, query
from .secret_corpus import Planted, corpus, env_for
from .test_secret_paths import assert_nothing_leaked

CANARY = "CANARY-paths-kept-6061"


@pytest.mark.parametrize("name", ["PASSWORD_STORE_DIR", "TOKEN_PATH", "DB_PASSWORD_FILE", "SSH_AUTH_SOCK",
                                  "secretsDir", "api-key-path", "XDG_RUNTIME_DIR", "GNUPG_HOME"])
def test_names_of_places_are_not_secrets(name: str) -> None:
    assert not is_secret_key(name)


@pytest.mark.parametrize("name", ["DB_PASSWORD", "API_TOKEN", "pwd", "PWD", "client_secret", "secret_key",
                                  "passwordDirective"])
def test_secret_names_stay_secrets(name: str) -> None:
    assert is_secret_key(name)


def test_pwd_is_kept_only_when_it_holds_a_path() -> None:
    assert not is_secret_under("PWD", "/home/me/proj") and not is_secret_under("OLDPWD", "/home/me")
    assert not is_secret_under("pwd", "C:\\Users\\me") and not is_secret_under("PWD", "~/proj")
    assert is_secret_under("pwd", "hunter2-hunter2") and is_secret_under("PWD", "Tr0ub4dor&3")
    r = Redactor(env={"PWD": "/home/me/proj", "OLDPWD": "/home/me", "PASSWORD_STORE_DIR": "/home/me/.password-store",
                      "DB_PASSWORD": "hunter2-the-database"})
    text = ("cat /home/me/proj/src/main.py; ls /home/me/.password-store\nPWD=/home/me/proj\nOLDPWD=/home/me\n"
            "DB_PASSWORD=hunter2-the-database")
    assert r.text(text) == ("cat /home/me/proj/src/main.py; ls /home/me/.password-store\nPWD=/home/me/proj\n"
                            "OLDPWD=/home/me\nDB_PASSWORD=[REDACTED:env:DB_PASSWORD]")
    assert r.value({"path": "/home/me/proj/src", "pwd": "/home/me/proj"}) == {"path": "/home/me/proj/src",
                                                                             "pwd": "/home/me/proj"}
    assert r.value({"user": "ada", "pwd": "hunter2!"}) == {"user": "ada", "pwd": "[REDACTED:secret_key]"}
    assert r.text("login pwd=hunter2! then PWD=/home/me/proj") == "login pwd=[REDACTED:secret_key] then PWD=/home/me/proj"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[Planted]]:
    """A working directory, entered as a shell enters it (``PWD``, ``OLDPWD``), with the corpus's
    secrets in the environment and a file holding every one of them."""
    proj = tmp_path / "home" / "me" / "proj"
    (proj / "src").mkdir(parents=True)
    planted = corpus()
    (proj / "src" / "main.py").write_text("\n".join([CANARY, *(p.text for p in planted)]))
    monkeypatch.chdir(proj)
    monkeypatch.setenv("PWD", str(proj))
    monkeypatch.setenv("OLDPWD", str(proj.parent))
    monkeypatch.setenv("PASSWORD_STORE_DIR", str(proj.parent / ".password-store"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", next(p.secret for p in planted if p.kind == "anthropic"))
    for name, value in env_for(planted).items():
        monkeypatch.setenv(name, value)
    return proj, planted


def test_a_run_traced_from_a_working_directory_keeps_its_paths(project: tuple[Path, list[Planted]]) -> None:
    proj, planted = project
    src = f"{proj}/src"
    read = Tool("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}},
                                         "required": ["path"]}, lambda path: f"{path}:\n{Path(path).read_text()}")
    ls = Tool("ls", "List a folder.", {"type": "object", "properties": {"path": {"type": "string"}},
                                       "required": ["path"]},
              lambda path: "\n".join(str(p) for p in sorted(Path(path).iterdir())))
    task = "What is in the project's main module?"
    script = Script({task: [act("ls", {"path": src}, f"Look in {src}."), act("read", {"path": f"{src}/main.py"}),
                            finish(f"{src}/main.py holds the keys.")]})
    db = proj.parent / "store" / "traces.duckdb"
    with MessagesServer(script) as server, Tracing(db) as tracing:
        model = AnthropicModel("scripted", base_url=server.base_url, retry=RetryPolicy(base_delay=0.01))
        assert Agent(model, [ls, read], tracing).run(task).status == "ok"

    calls = query(db, "SELECT tool, args, observation FROM tool_calls WHERE tool <> 'done' ORDER BY step")
    assert [(t, json.loads(a)) for t, a, _ in calls] == [("ls", {"path": src}), ("read", {"path": f"{src}/main.py"})]
    assert calls[0][2] == f"{src}/main.py" and calls[1][2].startswith(f"{src}/main.py:\n{CANARY}\n")
    assert query(db, "SELECT thought FROM steps ORDER BY step")[0] == (f"Look in {src}.",)
    assert query(db, "SELECT answer FROM runs") == [(f"{src}/main.py holds the keys.",)]
    text = assert_nothing_leaked(db.parent, planted)
    assert "[REDACTED:env:PWD]" not in text and CANARY in text


def test_an_import_from_a_working_directory_keeps_its_source(project: tuple[Path, list[Planted]]) -> None:
    """``looptrace import`` run from the directory, as a user runs it: ``runs.source`` is the path."""
    proj, planted = project
    log = proj / "logs" / "chat.json"
    log.parent.mkdir()
    log.write_text(json.dumps([{"role": "user", "content": f"read {proj}/src/main.py"},
                               {"role": "assistant", "content": (proj / "src" / "main.py").read_text()}]))
    db = proj.parent / "store" / "traces.duckdb"
    env = {**python_env(), "PWD": str(proj), "OLDPWD": str(proj.parent)}
    done = subprocess.run([PYTHON, "-m", "looptrace.tracer.cli", "import", "logs/chat.json", "--db", str(db)],
                          cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [(source, task)] = query(db, "SELECT source, task FROM runs")
    assert source.endswith(f"{proj}/logs/chat.json") and task == f"read {proj}/src/main.py"
    assert_nothing_leaked(db.parent, planted)
