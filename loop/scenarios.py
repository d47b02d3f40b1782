"""The bundled demo scenarios: healthy runs and each way an agent loop fails, fully scripted.

Each scenario is a task, the scripted model's replies for it, the policy it runs under and the
status it must end with. They run through the real loop, the real SDK and the local server, over a
small sandbox of real files made by ``make_sandbox``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .policy import Policy
from .replies import Fault, ScriptItem
from .scripted import act, acts, finish, say

__all__ = ["Scenario", "SCENARIOS", "make_sandbox", "conversations"]


@dataclass(frozen=True)
class Scenario:
    name: str
    task: str
    script: Sequence[ScriptItem]
    expect: str
    policy: Policy = Policy()
    workers: Mapping[str, Sequence[ScriptItem]] = field(default_factory=dict)  # sub-agent task -> replies
    description: str = ""


def make_sandbox(root: Path) -> Path:
    """A small project for the demo agent to work on (files are rewritten each time)."""
    files = {
        "README.md": "# shop\nA tiny web shop. Run `python src/app.py`.\n",
        "notes.txt": "Deploy is planned for 2026-12-14.\nOwner: Ada.\nRisk: the payment API rate limits.\n",
        "src/app.py": "import cart\n\n\ndef main():\n    # TODO: read the port from the environment\n"
                      "    cart.serve(port=8080)\n",
        "src/cart.py": "def serve(port):\n    # TODO: handle empty carts\n    print('serving', port)\n",
        "data/server.log": "".join(
            f"2026-11-30T12:{i // 60 % 60:02d}:{i % 60:02d} INFO request {i} handled in {i % 97} ms by worker "
            f"{i % 8}\n" if i != 3210 else "2026-11-30T12:53:30 ERROR payment API returned 429\n"
            for i in range(6000)
        ),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


_READ_NOTES = act("read_file", {"path": "notes.txt"}, "The notes should say when the deploy is.")

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "healthy", "Summarise notes.txt in one sentence.",
        [act("list_dir", {"path": "."}, "Let me see what is in the workspace."), _READ_NOTES,
         finish("Ada deploys on 2026-12-14; the risk is the payment API's rate limits.")],
        "ok", description="lists, reads, answers with done",
    ),
    Scenario(
        "end-turn", "What is 6 times 7, plus the square root of 16?",
        [act("calculator", {"expression": "6*7 + sqrt(16)"}), say("6 times 7 plus the square root of 16 is 46.")],
        "ok", description="answers with plain text (end_turn)",
    ),
    Scenario(
        "stagnation", "When is the deploy? Check notes.txt.",
        [_READ_NOTES] * 12, "stagnated",
        description="reads the same file again and again, through two reflection turns",
    ),
    Scenario(
        "cycle", "Find the owner of the shop.",
        [act("list_dir", {"path": "."}), act("read_file", {"path": "README.md"})] * 8, "stagnated",
        description="alternates between two actions (A, B, A, B, ...)",
    ),
    Scenario(
        "context-defended", "Find the first ERROR line in data/server.log.",
        [act("read_file", {"path": "data/server.log", "offset": 1 + 800 * i, "limit": 800},
             f"Reading the log, part {i + 1}.") for i in range(5)]
        + [finish("Line 3211: 2026-11-30T12:53:30 ERROR payment API returned 429")],
        "ok", Policy(max_observation_bytes=6_000, compact_at_tokens=5_000, keep_recent_turns=2),
        description="huge tool results: trimming and compaction keep the context small",
    ),
    Scenario(
        "context-overflow", "Find every warning in data/server.log.",
        [act("read_file", {"path": "data/server.log", "limit": 3000}, "I will read the whole log."),
         act("read_file", {"path": "data/server.log", "offset": 3001, "limit": 3000}),
         Fault(400, "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum")],
        "context_overflow", Policy(max_observation_bytes=None, compact_at_tokens=None),
        description="no defences: the prompt outgrows the window",
    ),
    Scenario(
        "max-iters", "Review every file in the workspace for bugs.",
        [act("read_file", {"path": p}) for p in ("README.md", "src/app.py", "src/cart.py", "notes.txt")]
        + [act("search", {"pattern": w}) for w in ("TODO", "port", "cart", "serve")],
        "max_iters", Policy(max_iters=6),
        description="never finishes: stopped by max_iters",
    ),
    Scenario(
        "budget", "Audit the log for slow requests.",
        [act("read_file", {"path": "data/server.log", "offset": 1 + 500 * i, "limit": 500},
             input_tokens=60_000, output_tokens=2_000) for i in range(6)],
        "budget_exceeded", Policy(budget_usd=0.50),
        description="expensive calls: stopped by the USD budget",
    ),
    Scenario(
        "unknown-tool", "Which files mention TODO?",
        [act("grep", {"pattern": "TODO"}, "grep will find them."),
         act("search", {"pattern": "TODO"}, "There is no grep; search is the tool."),
         finish("src/app.py and src/cart.py")],
        "ok", description="calls a tool that does not exist, then recovers",
    ),
    Scenario(
        "hallucinated-tools", "Open src/app.py and tell me the port.",
        [act("open_file", {"path": "src/app.py"}), act("cat", {"file": "src/app.py"}),
         act("view", {"path": "src/app.py"}), act("shell", {"cmd": "cat src/app.py"}),
         act("open_file", {"path": "src/app.py"})],
        "max_iters", Policy(max_iters=4),
        description="keeps calling tools that do not exist until the cap",
    ),
    Scenario(
        "invalid-args", "What does README.md say?",
        [act("read_file", {"file": "README.md"}), act("read_file", {"path": "README.md", "limit": 0}),
         act("read_file", {"path": "README.md"}), finish("It is a tiny web shop run with python src/app.py.")],
        "ok", description="invents arguments the tool's schema rejects (hallucinated_tool), then corrects them",
    ),
    Scenario(
        "overloaded", "Who owns the deploy?",
        [Fault(529, retry_after=0.05), _READ_NOTES, Fault(529), Fault(500, "api_error"), finish("Ada.")],
        "ok", description="the API is overloaded (529, 500): retried with backoff, then recovers",
    ),
    Scenario(
        "orchestrator", "Report the open TODOs and the deploy date.",
        [acts([("spawn_subagent", {"task": "List the TODO comments in src/.", "tools": ["search", "read_file"]}),
               ("spawn_subagent", {"task": "Find the deploy date in notes.txt.", "tools": ["read_file"]})],
              "Two independent questions: one worker each."),
         finish("TODOs: port from env (src/app.py), empty carts (src/cart.py). Deploy: 2026-12-14.")],
        "ok",
        workers={
            "List the TODO comments in src/.": [act("search", {"pattern": "TODO", "path": "src"}),
                                                finish("src/app.py: port from env; src/cart.py: empty carts")],
            "Find the deploy date in notes.txt.": [_READ_NOTES, finish("2026-12-14")],
        },
        description="an orchestrator with two sub-agents running in parallel",
    ),
)


def conversations(scenarios: Sequence[Scenario]) -> dict[str, list[ScriptItem]]:
    """All scripted conversations of ``scenarios``, by task, for one ``Script``."""
    out: dict[str, list[ScriptItem]] = {}
    for s in scenarios:
        for task, items in {s.task: s.script, **s.workers}.items():
            if task in out:
                raise ValueError(f"two scenarios share the task {task!r}")
            out[task] = list(items)
    return out
