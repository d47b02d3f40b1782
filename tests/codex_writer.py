"""Real Codex CLI rollouts, written offline: `codex exec` against looptrace's scripted Responses API.

The CLI is OpenAI's own npm package (`@openai/codex`, pinned below and in the Makefile's `agent-clis`
target, which installs it into build/npm). Each scenario runs `codex exec "task"` with its own
working folder and one shared CODEX_HOME, as a user's `~/.codex` would be shared, whose
`config.toml` names a custom model provider (`wire_api = "responses"`, `base_url` on 127.0.0.1), no
auth, no update check, no analytics; any other connection is sent to a dead proxy on loopback. The
scripted model calls the shell tool the CLI declares in its own request (`exec_command` with
`cmd` in 0.169; `shell` with a `command` list in older versions), never one of its own invention.

Scenarios (what a user of the tracker reports): ``normal`` (reasoning, a command, two parallel
commands, an answer), ``stuck`` (the same failing command six times, then the model gives up),
``model_error`` (every model call answers 500), ``interrupted`` (SIGINT to the CLI's process group,
as Ctrl-C sends it, while `sleep` runs), ``resumed`` (a session, then `codex exec resume` with a second
task: the CLI appends the turn to the same rollout) and ``forked`` (`codex exec fork` of ``normal``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looptrace.loop.responses_server import Reply, ResponsesServer, declared_tools

__all__ = ["CODEX_BIN", "CODEX_VERSION", "Written", "missing_reason", "write_sessions"]

CODEX_VERSION = "0.169.0"
ROOT = Path(__file__).resolve().parent.parent
CODEX_BIN = ROOT / "build" / "npm" / "node_modules" / ".bin" / "codex"
STUCK_CALLS = 6
RETRIES = 2  # request_max_retries: the failing model is asked 1 + RETRIES times


@dataclass
class Written:
    home: Path  # the CODEX_HOME: sessions/YYYY/MM/DD/rollout-*.jsonl under it
    sessions: dict[str, Path] = field(default_factory=dict)  # scenario -> its rollout file
    requests: dict[str, int] = field(default_factory=dict)  # scenario -> model requests the CLI made
    tools: list[str] = field(default_factory=list)  # the function tools the CLI declared


def missing_reason() -> str | None:
    """Why the pinned CLI cannot run here, or None."""
    if not CODEX_BIN.exists():
        return (f"the Codex CLI is not installed at {CODEX_BIN.relative_to(ROOT)} "
                "(`make agent-clis` installs @openai/codex with npm; npm is missing or failed)")
    try:
        done = subprocess.run([str(CODEX_BIN), "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        return f"the Codex CLI at {CODEX_BIN} does not start: {exc}"
    if CODEX_VERSION not in done.stdout:
        found = done.stdout.strip() or done.stderr.strip()
        return f"{CODEX_BIN} is {found!r}, not {CODEX_VERSION}: run `make agent-clis`"
    return None


def _shell_call(request: dict[str, Any], command: str) -> dict[str, Any]:
    """A call of the shell tool this request declares, with ``command``."""
    tools = declared_tools(request)
    if "exec_command" in tools and "cmd" in tools["exec_command"].get("parameters", {}).get("properties", {}):
        return {"name": "exec_command", "arguments": {"cmd": command}}
    if "shell" in tools:
        return {"name": "shell", "arguments": {"command": ["bash", "-lc", command]}}
    raise RuntimeError(f"the CLI declared no shell tool this script knows: {sorted(tools)}")


def _turn(request: dict[str, Any]) -> tuple[str, int]:
    """(the user's last message, how many tool results came back since it)."""
    task, outputs = "", 0
    for item in request.get("input", []):
        if item.get("type") == "message" and item.get("role") == "user":
            text = "".join(c.get("text", "") for c in item.get("content", []) if isinstance(c, dict))
            if not text.startswith("<"):  # the CLI's own context blocks (<environment_context>, ...)
                task, outputs = text, 0
        elif item.get("type") == "function_call_output":
            outputs += 1
    return task, outputs


def script(request: dict[str, Any]) -> Reply:
    """The scripted model: what to answer depends on the task it was given and how far it got."""
    task, done = _turn(request)
    if task.startswith("Fail:"):
        return Reply(status=500, error="scripted model: the upstream model is unavailable")
    if task.startswith("Write notes"):
        steps = [
            Reply(reasoning="I will write the note first, then read it back.",
                  tool_calls=[_shell_call(request, "printf 'hello from codex\\n' > notes.txt")]),
            Reply(reasoning="Check the content and its size.",
                  tool_calls=[_shell_call(request, "cat notes.txt"), _shell_call(request, "wc -c notes.txt")]),
            Reply(content="notes.txt says: hello from codex (17 bytes)."),
        ]
        return steps[min(done, 2)]
    if task.startswith("Read the build log"):
        if done < STUCK_CALLS:
            return Reply(reasoning="The log should be in build.log.",
                         tool_calls=[_shell_call(request, "cat build.log")])
        return Reply(content="I could not read build.log; giving up.")
    if task.startswith("Wait"):
        if done == 0:
            return Reply(tool_calls=[_shell_call(request, "touch .running && sleep 60")])
        return Reply(content="Waited.")
    if task.startswith("Count"):
        if done == 0:
            return Reply(tool_calls=[_shell_call(request, "wc -w notes.txt")])
        return Reply(content="notes.txt has 3 words.")
    if task.startswith(("Say", "And")):
        word = task.split()[-1]
        if done == 0:
            return Reply(tool_calls=[_shell_call(request, f"echo {word}")])
        return Reply(content=f"Said {word}.")
    raise RuntimeError(f"no script for the task {task!r}")


def _config(base_url: str) -> str:
    return f"""\
model = "scripted-model"
model_provider = "loopback"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.loopback]
name = "scripted model on loopback"
base_url = "{base_url}"
wire_api = "responses"
request_max_retries = {RETRIES}
stream_max_retries = 0

[analytics]
enabled = false
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
    dead = "http://127.0.0.1:9"  # the discard port: anything not for loopback fails at once, offline
    env.update(CODEX_HOME=str(home), HOME=str(home.parent), HTTP_PROXY=dead, HTTPS_PROXY=dead, ALL_PROXY=dead,
               http_proxy=dead, https_proxy=dead, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               RUST_LOG="error")
    return env


def _rollouts(home: Path) -> set[Path]:
    return set((home / "sessions").rglob("rollout-*.jsonl"))


def _session_id(path: Path) -> str:
    return path.stem[-36:]


class _Runner:
    def __init__(self, home: Path, server: ResponsesServer) -> None:
        self.home, self.server = home, server
        self.written = Written(home)

    def run(self, name: str, args: list[str], *, interrupt: bool = False) -> Path:
        work = self.home.parent / "work" / name
        work.mkdir(parents=True, exist_ok=True)
        before, asked = _rollouts(self.home), len(self.server.requests)
        cmd = [str(CODEX_BIN), "exec", "--skip-git-repo-check", *args]
        proc = subprocess.Popen(cmd, cwd=work, env=_env(self.home), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            if interrupt:
                deadline = time.monotonic() + 60
                while not (work / ".running").exists():  # the command is running: now Ctrl-C
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{name}: the command never started: {proc.communicate()[0][-2000:]}")
                    time.sleep(0.05)
                time.sleep(0.5)
                os.killpg(proc.pid, signal.SIGINT)
            output = proc.communicate(timeout=120)[0]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        new = _rollouts(self.home) - before
        if args[0] == "resume":
            path = next(p for p in _rollouts(self.home) if _session_id(p) == args[1])
        elif len(new) != 1:
            raise RuntimeError(f"{name}: expected one new rollout, found {sorted(new)}; "
                               f"the CLI said:\n{output[-3000:]}")
        else:
            path = new.pop()
        self.written.sessions[name] = path
        self.written.requests[name] = len(self.server.requests) - asked
        return path


def write_sessions(home: Path) -> Written:
    """Run every scenario with the real CLI into ``home`` (a fresh CODEX_HOME)."""
    reason = missing_reason()
    if reason:
        raise RuntimeError(reason)
    home.mkdir(parents=True, exist_ok=True)
    with ResponsesServer(script) as server:
        (home / "config.toml").write_text(_config(server.base_url))
        runner = _Runner(home, server)
        normal = runner.run("normal", ["Write notes.txt with a greeting and show what it holds."])
        runner.run("stuck", ["Read the build log and tell me why the build failed."])
        runner.run("model_error", ["Fail: anything at all."])
        runner.run("interrupted", ["Wait for the slow job."], interrupt=True)
        first = runner.run("resumed", ["Say one"])
        runner.run("resumed", ["resume", _session_id(first), "And two"])
        runner.run("forked", ["fork", _session_id(normal), "Count the words in notes.txt."])
        runner.written.tools = sorted(declared_tools(server.requests[0]))
    return runner.written
