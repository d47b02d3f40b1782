"""What AG2 0.14 records when a group chat stops at ``max_round``: ``python -m tests.ag2_probe LOG_FILE``.

The chat of tests/ag2_writer.py cut at ``max_round=2`` (its scripted model on loopback), run twice: with
``initiate_chat`` under AG2's file runtime logger, and with the ``run()`` API whose response streams
AG2's events. Prints one JSON object: where the words ``Maximum rounds (2) reached`` appear.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from looptrace.loop.openai_server import ChatCompletionsServer

from .ag2_writer import script

REASON = "Maximum rounds (2) reached"


def _team(url: str, work: str) -> tuple[Any, Any, Any]:
    import autogen

    config = {"config_list": [{"model": "gpt-4o-mini", "base_url": url, "api_key": "test"}], "cache_seed": None}
    executor = autogen.UserProxyAgent("Executor", human_input_mode="NEVER", default_auto_reply="",
                                      code_execution_config={"work_dir": work, "use_docker": False})
    engineer = autogen.AssistantAgent("Engineer", llm_config=config,
                                      system_message="You are the Engineer. Write Python in one code block.")
    reviewer = autogen.AssistantAgent("Reviewer", llm_config=config,
                                      system_message="You are the Reviewer. Say TERMINATE when the output is right.")
    group = autogen.GroupChat([executor, engineer, reviewer], messages=[], max_round=2,
                              speaker_selection_method="round_robin")
    manager = autogen.GroupChatManager(group, llm_config=config)
    return executor, manager, group


def main() -> None:
    import autogen.runtime_logging as runtime_logging

    log = Path(sys.argv[1])
    task = "Compute 6 * 7 in Python and print it."
    with ChatCompletionsServer(script) as server, tempfile.TemporaryDirectory() as work:
        runtime_logging.start(logger_type="file", config={"filename": str(log)})
        executor, manager, group = _team(server.base_url, work)
        stdout = io.StringIO()
        with contextlib.redirect_stdout(stdout):
            result = executor.initiate_chat(manager, message=task)
        runtime_logging.stop()
        executor2, manager2, _ = _team(server.base_url, work)
        with contextlib.redirect_stdout(io.StringIO()):
            response = executor2.run(manager2, message=task)
            events = [e.model_dump(mode="json") for e in response.events]
    found = {
        "groupchat.messages": REASON in json.dumps(group.messages),
        "ChatResult": REASON in json.dumps({"history": result.chat_history, "summary": result.summary,
                                           "cost": result.cost}, default=str),
        "runtime log": REASON in log.read_text(),
        "stdout": REASON in stdout.getvalue(),
        "run() events": [e["type"] for e in events if REASON in json.dumps(e)],
    }
    print(json.dumps(found))


if __name__ == "__main__":
    main()
