"""Trajectory files written by other agents, parsed into ``Trajectory`` values.

One module per format, each a pure ``parse(data, path) -> list[Trajectory]`` over already-decoded
data; ``detect`` picks the module for a JSON document, ``detect_lines`` for a JSONL file, and
Inspect's ``.eval`` archives are read member by member (``inspect_log.read_eval``). Formats from
other packages come last (``registry``). Nothing here touches the store: ``importing`` hands the
runs to the sink.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from . import (agentchat, claude_code, codex_cli, crewai_log, gemini_cli, generic_chat, inspect_log, minisweagent,
               openai_chat, openhands, sweagent)
from .detect import FORMATS, detect, is_candidate, loads, read_document
from .errors import TrajectoryFormatError
from .listing import DESCRIPTIONS  # what `looptrace import --formats` prints (docs/importers.md has the mapping)
from .registry import plugins
from .trajectory import Trajectory

__all__ = [
    "DESCRIPTIONS", "FORMATS", "PARSERS", "TrajectoryFormatError", "detect", "detect_lines", "is_candidate",
    "parse_file", "read_document", "read_lines", "stream_file",
]

JSONL = (".jsonl", ".jsonl.gz")
STREAM_CHUNK = 500  # runs of a JSONL file handed to the sink at a time: bounded memory for any size

PARSERS: dict[str, Callable[[Any, Path], list[Trajectory]]] = {
    "swe-agent": sweagent.parse,
    "mini-swe-agent": minisweagent.parse,
    "openai-chat": openai_chat.parse,
    "chat": generic_chat.parse,
    "inspect-ai": inspect_log.parse,
    "openhands": openhands.parse,
    "autogen-agentchat": agentchat.parse,
    "crewai": crewai_log.parse,
}

def iter_lines(path: Path, cut: list[str] | None = None) -> Iterator[Any]:
    """The parsed lines of a JSONL file (blank lines skipped), read one at a time, never the whole
    file; a bad line raises its number and the reason. With ``cut``, a last line that does not parse
    and has no newline after it (a write cut short: the writer was killed, or is still writing) ends
    the lines instead, and its reason is appended to ``cut``."""
    try:
        with (gzip.open(path, "rb") if path.name.lower().endswith(".gz") else open(path, "rb")) as f:
            seen = False
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    try:
                        text = raw.decode("utf-8-sig" if n == 1 else "utf-8")
                    except UnicodeDecodeError as exc:
                        reason = f"line {n}: not UTF-8 text (byte 0x{raw[exc.start]:02x})"
                        raise TrajectoryFormatError(reason) from exc
                    try:
                        entry = loads(text)
                    except TrajectoryFormatError as exc:
                        raise TrajectoryFormatError(f"line {n}: {exc}") from exc
                except TrajectoryFormatError as exc:
                    if cut is None or raw.endswith(b"\n"):
                        raise
                    cut.append(str(exc))
                    break
                yield entry
                seen = True
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TrajectoryFormatError(f"not a readable gzip file ({exc})") from exc
    except OSError as exc:
        raise TrajectoryFormatError(f"cannot read the file ({exc.strerror or exc})") from exc
    if not seen:
        raise TrajectoryFormatError("empty file")


def read_lines(path: Path) -> list[Any]:
    return list(iter_lines(path))


# JSONL formats whose file is one session (parsed whole), not one run a line.
SESSIONS: dict[str, Callable[[list[Any], Path], list[Trajectory]]] = {
    "claude-code": claude_code.parse_entries,
    codex_cli.FORMAT: codex_cli.parse_entries,
    gemini_cli.FORMAT: gemini_cli.parse_entries,
}


def detect_lines(path: Path, entries: list[Any]) -> str:
    """A session format (``claude-code``, ``codex-cli``, ``gemini-cli``), or the format every line has (each line a
    run), else ``unknown format``."""
    if claude_code.is_transcript(entries):
        return "claude-code"
    if codex_cli.is_rollout(entries):
        return codex_cli.FORMAT
    if gemini_cli.is_session_log(entries):
        return gemini_cli.FORMAT
    formats = set()
    for entry in entries[:20]:
        formats.add(detect(path, entry))
    if len(formats) != 1:
        several = ", ".join(sorted(formats))
        raise TrajectoryFormatError(f"unknown format (lines of several formats: {several})")
    return formats.pop()


def _per_line(fmt: str, entries: Iterable[Any], path: Path) -> Iterator[Trajectory]:
    for n, entry in enumerate(entries, 1):
        try:
            found = PARSERS[fmt](entry, path)
        except TrajectoryFormatError as exc:
            raise TrajectoryFormatError(f"line {n}: {exc}") from exc
        for t in found:
            t.key = f"{n}/{t.key}" if t.key else str(n)
            yield t


def _jsonl(path: Path) -> tuple[str, Iterator[Trajectory]]:
    cut: list[str] = []
    lines = iter_lines(path, cut)
    head = list(itertools.islice(lines, 20))
    if cut and not head:
        raise TrajectoryFormatError(cut[0])
    fmt = detect_lines(path, head)
    if fmt in SESSIONS:
        runs = SESSIONS[fmt](list(itertools.chain(head, lines)), path)
        return fmt, iter([_cut_short(t, cut[0]) for t in runs] if cut else runs)
    return fmt, _whole(_per_line(fmt, itertools.chain(head, lines), path), cut)


def _cut_short(t: Trajectory, reason: str) -> Trajectory:
    """A session whose log ends in a cut line went on past its last whole line: it did not end there, so
    the session's run is ``incomplete`` (unless it recorded a failure) with the cut as its error."""
    t.attributes["cut_line"] = reason
    if t.parent_key is None and t.status in ("ok", "incomplete"):
        t.status, t.answer = "incomplete", None
        t.error = t.error or f"the log ends in a cut line ({reason}): its writer stopped mid-write, or still writes"
    return t


def _whole(runs: Iterator[Trajectory], cut: list[str]) -> Iterator[Trajectory]:
    """A file of one run a line keeps its rule: a cut last line is a bad line, and rejects the file."""
    yield from runs
    if cut:
        raise TrajectoryFormatError(cut[0])


def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _parse(path: Path) -> tuple[str, list[Trajectory]]:
    name = path.name.lower()
    if name.endswith(".eval"):
        return "inspect-ai", inspect_log.read_eval(path)
    if name.endswith(JSONL):
        fmt, runs = _jsonl(path)
        return fmt, list(runs)
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
    _some_steps(fmt, runs)
    if any(not t.origin for t in runs):
        digest = _digest(path)
        for t in runs:
            t.origin = t.origin or digest
    return fmt, runs


def stream_file(path: Path, chunk: int = STREAM_CHUNK) -> tuple[str, Iterator[list[Trajectory]]]:
    """(format, runs ``chunk`` at a time): ``parse_file`` for most files, but a JSONL file of one run
    a line is read twice, never whole: once to check that every line is a run (so a bad line anywhere
    rejects the file before anything is written), then again, yielding its runs in chunks."""
    if not path.name.lower().endswith(JSONL):
        fmt, runs = parse_file(path)
        return fmt, iter([runs])
    fmt, checked = _jsonl(path)
    if fmt in SESSIONS:  # one session: parsed whole
        runs = list(checked)
        _some_steps(fmt, runs)
        digest = _digest(path)
        for t in runs:
            t.origin = t.origin or digest
        return fmt, iter([runs])
    stepped = False
    for t in checked:  # the first pass: the runs are dropped as they come
        stepped = stepped or _readable(t)
    if not stepped:
        _some_steps(fmt, [])
    return fmt, _chunks(path, _digest(path), chunk)


def _readable(t: Trajectory) -> bool:
    """A run worth importing: it has steps, or it records how it ended without any (an API error
    before the first step, an interruption)."""
    return bool(t.steps) or bool(t.error) or t.status not in ("ok", "incomplete")


def _some_steps(fmt: str, runs: list[Trajectory]) -> None:
    """A file none of whose runs has a step (or a recorded end) is skipped with the reason, never
    imported as empty runs: "ok, no failure" used to be the verdict on runs looptrace could not read."""
    if not any(_readable(t) for t in runs):
        raise TrajectoryFormatError(f"no steps: nothing in the file maps to a step of the {fmt} format "
                                    "(no assistant or agent turn, no action)")


def _chunks(path: Path, digest: str, chunk: int) -> Iterator[list[Trajectory]]:
    runs = _jsonl(path)[1]
    while batch := list(itertools.islice(runs, chunk)):
        for t in batch:
            t.origin = t.origin or digest
        yield batch
