"""``python -m viewer [PATH]``: the same as ``looptrace view [PATH]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .commands import register


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m viewer")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["view", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
