"""The ``looptrace`` command line: the parser shell, commands found by entry point, table output.

Each folder keeps its own commands beside the code they run (``store/commands.py``,
``ingest/commands.py``, ``loop/commands.py``, ...) and declares them in ``pyproject.toml`` under
``looptrace.commands``.
"""

from __future__ import annotations

from .main import COMMANDS_GROUP, add_command, build_parser, main

__all__ = ["COMMANDS_GROUP", "add_command", "build_parser", "main"]
