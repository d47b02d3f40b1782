"""Real Gemini CLI session logs, written offline: `gemini -p` against looptrace's scripted Gemini API.

The CLI is Google's npm package (`@google/gemini-cli`, pinned below and in the Makefile's
`gemini-cli` target, installed into build/npm beside the Codex CLI). It runs with a HOME of its own
whose `.gemini/settings.json` selects API-key auth (the key is any string: the server is on
loopback), trusts the folder, and turns telemetry, usage statistics and updates off;
`GOOGLE_GEMINI_BASE_URL` points it at the scripted server, and any other connection goes to a dead
proxy on loopback. The scripted model calls the shell tool the CLI declares (`run_shell_command`).

Scenarios: ``normal``, ``stuck`` (the same failing command until the CLI's own loop detector steps
in), ``model_error`` (every call of the agent's model answers 500; `general.maxAttempts` 2) and
``interrupted`` (SIGINT to the CLI's process group during `sleep`). The CLI writes
`~/.gemini/tmp/<project>/chats/session-*.jsonl`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looptrace.loop.gemini_server import GeminiServer, declared_functions
from looptrace.loop.responses_server import Reply

__all__ = ["GEMINI_BIN", "GEMINI_VERSION", "Written", "missing_reason", "write_sessions"]

GEMINI_VERSION = "0.61.0"
ROOT = Path(__file__).resolve().parent.parent
GEMINI_BIN = ROOT / "build" / "npm" / "node_modules" / ".bin" / "gemini"
ATTEMPTS = 2


@dataclass
class Written:
    home: Path  # the HOME: .gemini/tmp/<project>/chats/ under it
    sessions: dict[str, Path] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)  # scenario -> calls of the agent's model
    tools: list[str] = field(default_factory=list)


def missing_reason() -> str | None:
    if not GEMINI_BIN.exists():
        return (f"the Gemini CLI is not installed at {GEMINI_BIN.relative_to(ROOT)} "
                "(`make gemini-cli` installs @google/gemini-cli with npm; npm is missing or failed)")
    package = GEMINI_BIN.parent.parent / "@google" / "gemini-cli" / "package.json"
    version = json.loads(package.read_text()).get("version") if package.exists() else None
    if version != GEMINI_VERSION:
        return f"the Gemini CLI in build/npm is {version!r}, not {GEMINI_VERSION}: run `make gemini-cli`"
    return None


def _results(request: dict[str, Any]) -> tuple[str, int]:
    """(the user's last text, how many tool results came back since it)."""
    task, results = "", 0
    for content in request.get("contents", []):
        for part in content.get("parts", []):
            if content.get("role") == "user" and isinstance(part.get("text"), str) \
                    and not part["text"].startswith(("<", "System:")):
                task, results = part["text"], 0
            elif "functionResponse" in part:
                results += 1
    return task, results


def script(request: dict[str, Any]) -> Reply:
    if "run_shell_command" not in declared_functions(request):
        raise RuntimeError(f"the CLI declared no run_shell_command: {sorted(declared_functions(request))}")
    task, done = _results(request)

    def shell(command: str) -> dict[str, Any]:
        return {"name": "run_shell_command", "arguments": {"command": command}}

    if task.startswith("Fail:"):
        return Reply(status=500, error="scripted model: the upstream model is unavailable")
    if task.startswith("Write notes"):
        steps = [Reply(reasoning="I will write the note, then read it back.",
                       tool_calls=[shell("printf 'hello from gemini\\n' > notes.txt")]),
                 Reply(tool_calls=[shell("cat notes.txt")]),
                 Reply(content="notes.txt says: hello from gemini.")]
        return steps[min(done, 2)]
    if task.startswith("Read the build log"):
        return Reply(tool_calls=[shell("cat build.log")]) if done < 10 else Reply(content="Giving up.")
    if task.startswith("Wait"):
        return Reply(tool_calls=[shell("touch .running && sleep 60")]) if done == 0 else Reply(content="Waited.")
    raise RuntimeError(f"no script for the task {task!r}")


_SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "maxAttempts": ATTEMPTS},
}


def _env(home: Path, base_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    dead = "http://127.0.0.1:9"
    env.update(HOME=str(home), GEMINI_API_KEY="scripted-model-on-loopback", GOOGLE_GEMINI_BASE_URL=base_url,
               HTTP_PROXY=dead, HTTPS_PROXY=dead, http_proxy=dead, https_proxy=dead,
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", NO_COLOR="1")
    return env


def _sessions(home: Path) -> set[Path]:
    return set((home / ".gemini" / "tmp").rglob("session-*.jsonl"))


def write_sessions(home: Path) -> Written:
    """Run every scenario with the real CLI, HOME = ``home``."""
    reason = missing_reason()
    if reason:
        raise RuntimeError(reason)
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(_SETTINGS))
    written = Written(home)
    with GeminiServer(script) as server:
        for name, task in (("normal", "Write notes.txt with a greeting and show it."),
                           ("stuck", "Read the build log and tell me why the build failed."),
                           ("model_error", "Fail: anything at all."), ("interrupted", "Wait for the slow job.")):
            work = home / "work" / name
            work.mkdir(parents=True)
            before, asked = _sessions(home), len(server.requests)
            proc = subprocess.Popen([str(GEMINI_BIN), "-p", task, "--yolo"], cwd=work, env=_env(home, server.base_url),
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)
            try:
                if name == "interrupted":
                    deadline = time.monotonic() + 60
                    while not (work / ".running").exists():
                        if proc.poll() is not None or time.monotonic() > deadline:
                            raise RuntimeError(f"the command never started: {proc.communicate()[0][-2000:]}")
                        time.sleep(0.05)
                    time.sleep(0.5)
                    os.killpg(proc.pid, signal.SIGINT)
                output = proc.communicate(timeout=180)[0]
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                _end_orphans(work)
            new = _sessions(home) - before
            if len(new) != 1:
                raise RuntimeError(f"{name}: expected one new session log, found {sorted(new)}:\n{output[-3000:]}")
            written.sessions[name] = new.pop()
            written.requests[name] = sum(1 for r in server.requests[asked:] if isinstance(r, dict) and not
                                         (r.get("generationConfig") or {}).get("responseJsonSchema"))
        written.tools = sorted(declared_functions(next(
            r for r in server.requests if isinstance(r, dict) and declared_functions(r))))
    return written


def _end_orphans(work: Path) -> None:
    """The CLI leaves a command it was running when interrupted (its own process group) behind: end
    the ones started in ``work`` (found by their cwd), by pid."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if Path(os.readlink(proc / "cwd")) == work:
                os.kill(int(proc.name), signal.SIGKILL)
        except OSError:
            continue
