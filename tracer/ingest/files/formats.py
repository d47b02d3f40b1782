"""Trajectory files written by other agents, parsed into ``Trajectory`` values.

One module per format, each a pure ``parse(data, path) -> list[Trajectory]`` over already-decoded
data; ``detect`` picks the module for a JSON document, ``detect_lines`` for a JSONL file, and
Inspect's ``.eval`` archives are read member by member (``inspect_log.read_eval``). Formats from
other packages come last (``registry``). Nothing here touches the store: ``importing`` hands the
runs to the sink.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import claude_code, generic_chat, inspect_log, minisweagent, openai_chat, openhands, sweagent
from .detect import FORMATS, detect, is_candidate, loads, read_document, read_text
from .errors import TrajectoryFormatError
from .registry import plugins
from .trajectory import Trajectory

__all__ = [
    "DESCRIPTIONS", "FORMATS", "PARSERS", "TrajectoryFormatError", "detect", "detect_lines", "is_candidate",
    "parse_file", "read_document", "read_lines",
]

PARSERS: dict[str, Callable[[Any, Path], list[Trajectory]]] = {
    "swe-agent": sweagent.parse,
    "mini-swe-agent": minisweagent.parse,
    "openai-chat": openai_chat.parse,
    "chat": generic_chat.parse,
    "inspect-ai": inspect_log.parse,
    "openhands": openhands.parse,
}

# What `looptrace import --formats` prints for the built-in formats (docs/importers.md has the mapping).
DESCRIPTIONS: dict[str, str] = {
    "swe-agent": "SWE-agent 0.x/1.x trajectories (.traj, .traj.gz)",
    "mini-swe-agent": "mini-swe-agent 1.x (bash blocks) and 2.x (tool calls) trajectories (.traj.json)",
    "openai-chat": "OpenAI-style tool-calling transcripts: tau-bench results, {messages: [...]}, bare message "
                   "lists (JSON, JSONL one run per line, or Python literals)",
    "chat": "plain chat transcripts without tool calls",
    "inspect-ai": "Inspect AI eval logs (.eval archives and .json), one run per sample and epoch",
    "openhands": "OpenHands event streams (trajectory exports, evaluation output.jsonl, [action, observation] "
                 "pairs)",
    "claude-code": "Claude Code session transcripts (~/.claude/projects/*/*.jsonl), subagents as sub-runs",
    "otlp-json": "OTLP JSON trace files (the Collector's file exporter), mapped as `looptrace collect` does",
}


def read_lines(path: Path) -> list[Any]:
    """The parsed lines of a JSONL file (blank lines skipped), or the first bad line as the reason."""
    entries = []
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if line.strip():
            try:
                entries.append(loads(line))
            except TrajectoryFormatError as exc:
                raise TrajectoryFormatError(f"line {n}: {exc}") from exc
    if not entries:
        raise TrajectoryFormatError("empty file")
    return entries


def detect_lines(path: Path, entries: list[Any]) -> str:
    """``claude-code``, or the format every line has (each line a run), else ``unknown format``."""
    if claude_code.is_transcript(entries):
        return "claude-code"
    formats = set()
    for entry in entries[:20]:
        formats.add(detect(path, entry))
    if len(formats) != 1:
        raise TrajectoryFormatError(f"unknown format (lines of several formats: {', '.join(sorted(formats))})")
    return formats.pop()


def _per_line(fmt: str, entries: list[Any], path: Path) -> list[Trajectory]:
    runs = []
    for n, entry in enumerate(entries, 1):
        try:
            found = PARSERS[fmt](entry, path)
        except TrajectoryFormatError as exc:
            raise TrajectoryFormatError(f"line {n}: {exc}") from exc
        for t in found:
            t.key = f"{n}/{t.key}" if t.key else str(n)
        runs.extend(found)
    return runs


def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _parse(path: Path) -> tuple[str, list[Trajectory]]:
    name = path.name.lower()
    if name.endswith(".eval"):
        return "inspect-ai", inspect_log.read_eval(path)
    if name.endswith((".jsonl", ".jsonl.gz")):
        entries = read_lines(path)
        fmt = detect_lines(path, entries)
        if fmt == "claude-code":
            return fmt, claude_code.parse_entries(entries, path)
        return fmt, _per_line(fmt, entries, path)
    data = read_document(path)
    try:
        fmt = detect(path, data)
    except TrajectoryFormatError:
        for importer in plugins()[0]:
            if importer.detect(path, data):
                return importer.name, importer.parse(data, path)
        raise
    return fmt, PARSERS[fmt](data, path)


def parse_file(path: Path) -> tuple[str, list[Trajectory]]:
    """(format, runs) of one file; ``source`` is ``path`` as given, so pass it absolute.

    Each run's id hashes the file's content (unless its format gives it a global id), so the same
    content under another path is the same run. Raises ``TrajectoryFormatError`` with the reason when
    the file cannot be imported.
    """
    fmt, runs = _parse(path)
    if any(not t.origin for t in runs):
        digest = _digest(path)
        for t in runs:
            t.origin = t.origin or digest
    return fmt, runs
