"""The ``looptrace`` command: a thin shell. Each package registers its own commands.

Commands are found through the ``looptrace.commands`` entry-point group, so the CLI (in the lowest
layer) never imports the loop, replay or viewer packages by name, and a third-party package can add
a command the same way. A command module exposes ``register(subparsers)``; it must import nothing
heavy at module level (the viewer imports Textual only when ``view`` runs), so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import logging
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["COMMANDS_GROUP", "main", "build_parser", "add_command"]

COMMANDS_GROUP = "looptrace.commands"  # entry-point group: a module with ``register(subparsers)``
# Commands whose start-up is measured (``make bench`` cli_startup): loaded without reading any
# package's metadata, since ``importlib.metadata`` alone costs a ``looptrace sql`` about a tenth of
# its CPU. Each is also declared as an entry point (tests/test_layout.py checks they agree).
QUICK_COMMANDS = {"sql": "looptrace.tracer.query.commands"}
DESCRIPTION_WIDTH = 78  # a command's --help description, read whole at 80 columns


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, example: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example. Its description is wrapped to ``DESCRIPTION_WIDTH``
    here (the raw formatter, which keeps the example's layout, would print it on one line)."""
    return sub.add_parser(
        name,
        help=help,
        description=textwrap.fill(help, DESCRIPTION_WIDTH, break_on_hyphens=False),
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with only the entry point named ``only``."""
    parser = argparse.ArgumentParser(
        prog="looptrace",
        description="Trace-first observability and replay for LLM agent loops.",
        epilog="example:\n  looptrace demo --db demo.duckdb && looptrace sql --db demo.duckdb "
        '"SELECT status, count(*) FROM runs GROUP BY status"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if only in QUICK_COMMANDS:
        importlib.import_module(QUICK_COMMANDS[only]).register(sub)
        return parser
    for entry in _all_commands():
        if only is None or entry.name == only:
            entry.load().register(sub)
    return parser


@functools.cache
def _all_commands() -> list[EntryPoint]:
    from importlib.metadata import entry_points

    return sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name)


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a for a in parser._actions if a.dest == "command").choices  # type: ignore[return-value]


def _named_command(argv: Sequence[str]) -> str | None:
    """The command of ``argv`` when it is also the name of its entry point (sql, compact, ...), so
    that only that module is imported: start-up is most of a quick ``looptrace sql``."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first is None or (first not in QUICK_COMMANDS and not any(e.name == first for e in _all_commands())):
        return None
    return first


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    only = _named_command(argv)
    parser = build_parser(only)
    if only is not None and only not in _choices(parser):
        parser = build_parser()  # the entry point registers other names only: list every command
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`looptrace sql ... | head`): that is its choice, not an error worth a traceback.
        # Python flushes stdout again at exit, so point it at /dev/null first or that flush raises too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # what a shell reports for a writer ended by SIGPIPE

