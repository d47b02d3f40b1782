"""An AG2 group chat log written by the real ``ag2`` package: ``python -m tests.ag2_writer OUT_DIR``.

Three agents in a round-robin ``GroupChat``: ``Executor`` (a ``UserProxyAgent`` that runs code locally,
in a temporary folder, never Docker), ``Engineer`` and ``Reviewer`` (``AssistantAgent`` s on the scripted
Chat Completions server on 127.0.0.1, looptrace's ``ChatCompletionsServer``). The Engineer's first
code fails (``exitcode: 1``), its second prints 42, then the Reviewer says TERMINATE. A second chat
is cut by ``max_round`` (2) while the Engineer's code waits to run; a third (``max_round`` 3) after the
Reviewer's "Run it, please.": an agent's plain message, and still no end. Each chat's ``groupchat.messages``,
AG2's own record of the conversation, is written as ``{"messages": [...]}``: the file a user saves.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from looptrace.loop.openai_server import ChatCompletionsServer

FIRST = "```python\nimport no_such_module\n```"
SECOND = "```python\nprint(6 * 7)\n```"


def script(body: dict[str, Any]) -> dict[str, Any]:
    """The Engineer and the Reviewer, told apart by their system message; turns by results seen."""
    messages = body.get("messages", [])
    system = str(messages[0].get("content", "")) if messages else ""
    seen = sum("exitcode:" in str(m.get("content", "")) for m in messages)
    if "Engineer" in system:
        return {"content": FIRST if seen == 0 else SECOND}
    return {"content": "The output is 42, as asked. TERMINATE" if seen >= 2 else "Run it, please."}


def chat(url: str, work: str, max_round: int) -> list[dict[str, Any]]:
    import autogen

    config = {"config_list": [{"model": "gpt-4o-mini", "base_url": url, "api_key": "test"}], "cache_seed": None}
    executor = autogen.UserProxyAgent("Executor", human_input_mode="NEVER", default_auto_reply="",
                                      code_execution_config={"work_dir": work, "use_docker": False})
    engineer = autogen.AssistantAgent("Engineer", llm_config=config,
                                      system_message="You are the Engineer. Write Python in one code block.")
    reviewer = autogen.AssistantAgent("Reviewer", llm_config=config,
                                      system_message="You are the Reviewer. Say TERMINATE when the output is right.")
    group = autogen.GroupChat([executor, engineer, reviewer], messages=[], max_round=max_round,
                              speaker_selection_method="round_robin")
    manager = autogen.GroupChatManager(group, llm_config=config,
                                       is_termination_msg=lambda m: "TERMINATE" in str(m.get("content") or ""))
    executor.initiate_chat(manager, message="Compute 6 * 7 in Python and print it.")
    return list(group.messages)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with ChatCompletionsServer(script) as server, tempfile.TemporaryDirectory() as work:
        (out / "ag2_done.json").write_text(json.dumps({"messages": chat(server.base_url, work, 20)}))
        (out / "ag2_cut.json").write_text(json.dumps({"messages": chat(server.base_url, work, 2)}))
        (out / "ag2_limit.json").write_text(json.dumps({"messages": chat(server.base_url, work, 3)}))


if __name__ == "__main__":
    main()
