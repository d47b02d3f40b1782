"""``looptrace import``: files written by other agents, through the sink, into a store."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

from ...cli.main import add_command
from ...store import DEFAULT_DB

if TYPE_CHECKING:
    from .importing import ImportReport

__all__ = ["register"]


class _Progress:
    """Progress on stderr: rich's progress bar on a terminal, else a plain line every 100 files."""

    EVERY = 100

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.bar: Any = None
        self.task: Any = None
        if out.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.description}"), TimeRemainingColumn(),
                                console=Console(file=out))

    def __call__(self, done: int, total: int, report: ImportReport) -> None:
        line = (f"{report.runs_imported} runs new, {report.runs_present} present, "
                f"{len(report.skipped)} skipped")
        if self.bar is not None:
            if self.task is None:
                self.bar.start()
                self.task = self.bar.add_task(line, total=total)
            self.bar.update(self.task, completed=done, description=line)
        elif done % self.EVERY == 0:
            print(f"imported {done}/{total} files ({line})", file=self.out, flush=True)

    def close(self) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.stop()


def _formats() -> int:
    from .listing import DESCRIPTIONS, format_lines
    from .registry import GROUP, plugins

    found, broken = plugins()
    rows = [*DESCRIPTIONS.items(), *((i.name, f"{i.description} (plug-in)") for i in found),
            *((name, f"could not be loaded from the {GROUP} entry points: {reason}") for name, reason in broken)]
    for line in format_lines(rows):
        print(line)
    return 0


def _plugin_names() -> list[str]:
    """The names the installed plug-ins declare, read from their metadata without loading them (a
    broken one is reported by --formats, not by --help)."""
    from importlib.metadata import entry_points

    from .registry import GROUP

    return sorted({ep.name for ep in entry_points(group=GROUP)})


def _import(args: argparse.Namespace) -> int:
    from ...store import Store, StoreError

    if args.formats:
        return _formats()
    if not args.paths:
        print("error: give a file or folder to import (or --formats to list the formats)", file=sys.stderr)
        return 2
    from .importing import import_paths

    progress = _Progress(sys.stderr)
    try:
        if args.catalog:  # appended through the sink like any import; runs already there are skipped
            from ...store.iceberg import CatalogStore

            report = import_paths(CatalogStore(args.catalog), args.paths, progress=progress)
        else:
            report = import_paths(Store(args.db), args.paths, progress=progress)
    except StoreError as exc:
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    progress.close()
    if report.interrupted:
        return _interrupted(args.db, report)
    for path, reason in report.skipped:
        print(f"skipped {path}: {reason}")
    formats = ", ".join(f"{name} {n}" for name, n in sorted(report.by_format.items(), key=lambda kv: -kv[1]))
    print(f"runs imported: {report.runs_imported}")
    print(f"runs already present: {report.runs_present}")
    print(f"steps imported: {report.steps_imported}")
    if report.log_records_imported:
        print(f"log records imported: {report.log_records_imported} (see the log_records table)")
    print(f"files: {report.files_seen} seen, {len(report.skipped)} skipped" + (f"; runs by format: {formats}"
                                                                            if formats else ""))
    if report.runs_without_steps:
        print(f"warning: {report.runs_without_steps} of the runs imported have no steps "
              "(their files record no action or agent turn); the analyzer calls them incomplete")
    if report.runs_imported:
        from ...on_stored import notify_stored

        from ...store.backend import store_target

        # the runs without a diagnosis: the ones just imported
        notify_stored(store_target(args), out=sys.stdout)
    if not report.ok:
        print("error: nothing could be imported", file=sys.stderr)
    return 0 if report.ok else 1


def _interrupted(db: str, report: ImportReport) -> int:
    """After Ctrl-C: what was kept, diagnosed like any import, and how to finish."""
    print(f"interrupted after {report.files_done} of {report.files_seen} files: kept {report.runs_imported} new runs "
          f"({report.steps_imported} steps; {report.runs_present} were already present, "
          f"{len(report.skipped)} files skipped). Run the same command again to import the rest: "
          "what is already stored is recognised and not added twice.", file=sys.stderr, flush=True)
    if report.runs_imported:
        from ...on_stored import notify_stored

        notify_stored(db, out=sys.stdout)
    return 130


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from .listing import help_list

    p = add_command(
        sub, "import", f"Import trajectory files or folders of them as runs: {help_list(_plugin_names())}. "
        "--formats says what each reads.",
        f"looptrace import runs/ more.traj.gz --db {DEFAULT_DB}",
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="a file or a folder (searched recursively)")
    p.add_argument("--formats", action="store_true",
                   help="list the formats it reads (plug-ins included) and exit")
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    p.add_argument("--catalog", default=None, metavar="NAME",
                   help="import into an Iceberg catalog instead (docs/scale.md; needs the scale extra)")
    p.set_defaults(func=_import)

