"""Which format a file is in: by extension first, then by the keys its JSON holds.

Folder names are never consulted: a folder of downloads mixes formats. Reading is strict (UTF-8,
complete gzip, valid JSON) so a damaged file is reported with a reason instead of importing a
silently shortened run. Some benchmarks write their logs with Python's ``repr`` instead of JSON:
text that is not JSON but is a Python literal is read with ``ast.literal_eval`` (never ``eval``).
"""

from __future__ import annotations

import ast
import gzip
import json
import re
import zlib
from pathlib import Path
from typing import Any

from .errors import TrajectoryFormatError
from .agentchat import is_task_result
from .crewai_log import is_task_log
from .generic_chat import is_message, messages_of
from .openai_chat import is_episode
from .openhands import is_event_stream
from .text import content_text, decode_document

__all__ = ["FORMATS", "MAX_BYTES", "detect", "is_candidate", "loads", "read_document", "read_text"]

FORMATS = ("swe-agent", "mini-swe-agent", "openai-chat", "chat", "inspect-ai", "openhands", "autogen-agentchat",
           "crewai")
MAX_BYTES = 1 << 30  # a trajectory bigger than 1 GiB (decompressed) is refused rather than read into memory
# A Python literal is parsed into a tree several times its size: only files up to this are tried.
LITERAL_MAX_CHARS = 64 << 20
_READ_SUFFIXES = (".json", ".traj", ".json.gz", ".traj.gz", ".jsonl", ".jsonl.gz", ".eval")
_BASH_BLOCK = re.compile(r"```bash\s*\n")


def is_candidate(path: Path) -> bool:
    """Worth opening: other files (README.md, labels.csv) are skipped without reading them."""
    return path.name.lower().endswith(_READ_SUFFIXES)


def read_text(path: Path) -> str:
    """The text of ``path`` (gunzipped when it ends in ``.gz``), or a reason it cannot be read."""
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TrajectoryFormatError(f"not a readable gzip file ({exc})") from exc
    except OSError as exc:
        raise TrajectoryFormatError(f"cannot read the file ({exc.strerror or exc})") from exc
    text = decode_document(raw, MAX_BYTES)
    if not text.strip():
        raise TrajectoryFormatError("empty file")
    return text


def loads(text: str) -> Any:
    """JSON, or a Python literal (``repr`` of lists and dicts); else the JSON error as the reason."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        head = text.lstrip()[:1]
        if head in ("[", "{") and len(text) <= LITERAL_MAX_CHARS:
            try:
                return ast.literal_eval(text.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
        reason = f"invalid JSON: {exc.msg.removesuffix(' at')} at line {exc.lineno} column {exc.colno}"
        raise TrajectoryFormatError(reason) from exc
    except RecursionError as exc:
        raise TrajectoryFormatError("invalid JSON: nested too deeply") from exc


def read_document(path: Path) -> Any:
    """The parsed JSON (or Python literal) of ``path``, or a reason it cannot be read."""
    return loads(read_text(path))


def _has_tool_traffic(messages: list[Any]) -> bool:
    return any(
        isinstance(m, dict) and (m.get("role") == "tool" or bool(m.get("tool_calls")) or "function_call" in m)
        for m in messages
    )


def _is_mini(data: dict[str, Any], name: str) -> bool:
    if name.endswith(".traj.json") or str(data.get("trajectory_format", "")).startswith("mini-swe-agent"):
        return True
    info = data.get("info")
    return isinstance(info, dict) and "exit_status" in info and any(
        isinstance(m, dict) and m.get("role") == "assistant"
        and _BASH_BLOCK.search(content_text(m.get("content"))) is not None
        for m in data["messages"]
    )


def _is_inspect(data: Any) -> bool:
    return (isinstance(data, dict) and isinstance(data.get("eval"), dict) and "version" in data
            and "task" in data["eval"])


def detect(path: Path, data: Any) -> str:
    """One of ``FORMATS`` for a file's parsed JSON, or ``TrajectoryFormatError("unknown format")``."""
    name = path.name.lower()
    if name.endswith((".traj", ".traj.gz")):
        return "swe-agent"
    if _is_inspect(data):
        return "inspect-ai"
    if is_event_stream(data):
        return "openhands"
    if isinstance(data, dict) and isinstance(data.get("trajectory"), list):
        return "swe-agent"
    if isinstance(data, dict) and isinstance(data.get("messages"), list) and _is_mini(data, name):
        return "mini-swe-agent"
    if isinstance(data, dict) and isinstance(data.get("traj"), list):
        return "openai-chat"
    if isinstance(data, list) and data and all(is_episode(item) for item in data):
        return "openai-chat"
    if is_task_result(data):
        return "autogen-agentchat"
    if is_task_log(data):
        return "crewai"
    messages = messages_of(data)
    if messages and all(is_message(m) for m in messages):
        return "openai-chat" if _has_tool_traffic(messages) else "chat"
    raise TrajectoryFormatError("unknown format")
