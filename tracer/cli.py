"""The ``looptrace`` command: a thin shell. Each package registers its own commands.

A command module exposes ``register(subparsers)``; it must import nothing heavy at module level
(the viewer imports Textual only when ``view`` runs), so ``looptrace --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

__all__ = ["main", "build_parser", "add_command"]

COMMAND_MODULES = (
    "tracer.commands", "tracer.ingest.commands", "tracer.export.commands", "loop.commands", "replay.commands",
    "replay.replay_commands", "viewer.commands",
)


def add_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help: str, example: str
) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example."""
    return sub.add_parser(
        name,
        help=help,
        description=help,
        epilog=f"example:\n  {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="looptrace",
        description="Trace-first observability and replay for LLM agent loops.",
        epilog="example:\n  looptrace demo --db demo.duckdb && looptrace sql --db demo.duckdb "
        '"SELECT status, count(*) FROM runs GROUP BY status"',
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise  # a missing dependency inside the module, not a missing module
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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


if __name__ == "__main__":
    sys.exit(main())
