"""A recording as a standalone JSON file (a cassette), so a run can be replayed without its store."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .recording import RecordedCall, RecordedTool, Recording, RecordingError

__all__ = ["CASSETTE_VERSION", "save_cassette", "load_cassette"]

CASSETTE_VERSION = 1


def save_cassette(recording: Recording, path: str | Path) -> None:
    data = {"looptrace_cassette": CASSETTE_VERSION, **asdict(recording)}
    # Key order is kept: requests built from recorded data (a compaction transcript) depend on it.
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def load_cassette(path: str | Path) -> Recording:
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text())
        version = data.pop("looptrace_cassette")
        if version != CASSETTE_VERSION:
            raise RecordingError(f"{path}: cassette version {version} is not supported (expected {CASSETTE_VERSION})")
        data["calls"] = [RecordedCall(**c) for c in data["calls"]]
        data["tools"] = [RecordedTool(**t) for t in data["tools"]]
        return Recording(**data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordingError(f"{path}: not a readable looptrace cassette ({exc})") from exc
