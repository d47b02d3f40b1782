"""mini-swe-agent 2.x trajectories written by the real package: ``python -m tests.mini_writer DIR``.

mini-swe-agent's own ``DefaultAgent`` runs in a ``LocalEnvironment`` (real shell commands in DIR)
on its deterministic tool-calling model, with the package's default config: ``ok.traj.json`` runs
two commands in one response (one that does not exist), then submits; ``limit.traj.json`` lists the
folder until its step limit stops it; ``format.traj.json`` answers without a tool call, then calls
a tool that is not ``bash``, then submits; ``unpriced.traj.json`` submits at once with the cost of 0.0
mini-swe-agent's litellm model counts for a model it cannot price under ``cost_tracking: ignore_errors``. A child process keeps the package's global model stats
out of the tests.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml
from minisweagent.agents.default import DefaultAgent
from minisweagent.config import builtin_config_dir
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.test_models import DeterministicToolcallModel, make_toolcall_output

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\necho hello"


def call(cid: str, command: str, name: str = "bash") -> tuple[dict[str, Any], dict[str, Any]]:
    function = {"name": name, "arguments": json.dumps({"command": command})}
    # The model's own parser would refuse a tool other than bash (a FormatError): no action to run.
    action = {"command": command, "tool_call_id": cid} if name == "bash" else {}
    return {"id": cid, "type": "function", "function": function}, action


def reply(text: str | None, *calls: tuple[dict[str, Any], dict[str, Any]]) -> dict[str, Any]:
    return make_toolcall_output(text, [c for c, _ in calls], [a for _, a in calls if a.get("command")])


def run(path: Path, outputs: list[dict[str, Any]], step_limit: int = 0) -> None:
    config = yaml.safe_load((builtin_config_dir / "default.yaml").read_text())
    agent = {**config["agent"], "step_limit": step_limit, "cost_limit": 0, "output_path": path}
    model = DeterministicToolcallModel(outputs=outputs, format_error_template=config["model"]["format_error_template"])
    try:
        DefaultAgent(model, LocalEnvironment(cwd=str(path.parent)), **agent).run("Say hello.")
    except Exception:  # noqa: BLE001 - the agent saved its trajectory before raising
        pass


def write(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    run(folder / "ok.traj.json", [reply("Look first.", call("c1", "echo hello"), call("c2", "nosuchcmd")),
                                  reply("Done.", call("c3", SUBMIT))])
    run(folder / "limit.traj.json", [reply("Again.", call(f"l{i}", "ls")) for i in range(5)], step_limit=3)
    run(folder / "format.traj.json", [reply("I will just answer."), reply("Python!", call("p1", "print(1)", "python")),
                                      reply("Fine.", call("s1", SUBMIT))])
    unpriced = reply("Done.", call("u1", SUBMIT))
    unpriced["extra"]["cost"] = 0.0  # what LitellmModel._calculate_cost returns when it may not raise
    run(folder / "unpriced.traj.json", [unpriced])


if __name__ == "__main__":
    write(Path(sys.argv[1]))
