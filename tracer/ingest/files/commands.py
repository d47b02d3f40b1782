"""``looptrace import``: files written by other agents, through the sink, into a store."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, TextIO

from ...cli.main import add_command
from ...store import DEFAULT_DB

if TYPE_CHECKING:
    from .importing import ImportReport

__all__ = ["register"]


class _Progress:
    """``imported 120/543 files ...`` on stderr: one updating line on a terminal, else every 100 files."""

    EVERY = 100
    INTERVAL = 0.1  # seconds between redraws on a terminal

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.drawn = 0.0
        self.shown = False

    def __call__(self, done: int, total: int, report: ImportReport) -> None:
        line = (f"imported {done}/{total} files ({report.runs_imported} runs new, "
                f"{report.runs_present} present, {len(report.skipped)} skipped)")
        if self.tty:
            now = time.monotonic()
            if done == total or now - self.drawn >= self.INTERVAL:
                self.out.write(f"\r{line}\x1b[K")
                self.out.flush()
                self.drawn, self.shown = now, True
        elif done % self.EVERY == 0:
            print(line, file=self.out, flush=True)

    def close(self) -> None:
        if self.tty and self.shown:
            self.out.write("\n")
            self.out.flush()


def _import(args: argparse.Namespace) -> int:
    from ...store import Store, StoreError

    from .importing import import_paths

    progress = _Progress(sys.stderr)
    try:
        report = import_paths(Store(args.db), args.paths, progress=progress)
    except StoreError as exc:
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    progress.close()
    for path, reason in report.skipped:
        print(f"skipped {path}: {reason}")
    formats = ", ".join(f"{name} {n}" for name, n in sorted(report.by_format.items(), key=lambda kv: -kv[1]))
    print(f"runs imported: {report.runs_imported}")
    print(f"runs already present: {report.runs_present}")
    print(f"steps imported: {report.steps_imported}")
    print(f"files: {report.files_seen} seen, {len(report.skipped)} skipped" + (f"; runs by format: {formats}"
                                                                            if formats else ""))
    if report.runs_imported:
        from ...on_stored import notify_stored

        notify_stored(args.db, out=sys.stdout)  # the runs without a diagnosis: the ones just imported
    if not report.ok:
        print("error: nothing could be imported", file=sys.stderr)
    return 0 if report.ok else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "import", "Import trajectory files or folders of them (SWE-agent .traj/.traj.gz, mini-swe-agent "
        ".traj.json, tau-bench and other OpenAI-style chat transcripts, generic chat logs, OTLP JSON files) "
        "as runs.",
        f"looptrace import runs/ more.traj.gz --db {DEFAULT_DB}",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="a file or a folder (searched recursively)")
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    p.set_defaults(func=_import)

