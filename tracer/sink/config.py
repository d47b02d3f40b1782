"""The user's own redaction rules: extra patterns and allow-listed values, from a TOML file.

The file is named by ``LOOPTRACE_REDACT_CONFIG`` (or ``Redactor(config=...)``), so every process
that writes (the agent's exporter, ``looptrace serve``, ``looptrace import``) reads the same rules
without a flag on each command::

    [patterns]              # name = Python regular expression; the match is replaced
    ticket = "TICKET-[0-9]+"

    allow = ["AKIAIOSFODNN7EXAMPLE"]   # values never redacted (documentation examples, test keys)

A file that cannot be read or holds a bad pattern is an error at start-up, naming the file: a
typo must not silently switch a rule off.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field

__all__ = ["UserRules", "load_config", "RedactConfigError"]


class RedactConfigError(ValueError):
    pass


@dataclass(frozen=True)
class UserRules:
    patterns: dict[str, str] = field(default_factory=dict)
    allow: frozenset[str] = frozenset()


def load_config(path: str | None) -> UserRules:
    if not path:
        return UserRules()
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RedactConfigError(f"redaction config {path}: {exc}") from exc
    patterns = data.get("patterns", {})
    allow = data.get("allow", [])
    if not isinstance(patterns, dict) or not all(isinstance(v, str) for v in patterns.values()):
        raise RedactConfigError(f"redaction config {path}: [patterns] maps names to regular expressions (strings)")
    if not isinstance(allow, list) or not all(isinstance(v, str) for v in allow):
        raise RedactConfigError(f"redaction config {path}: allow is a list of strings")
    for name, pattern in patterns.items():
        try:
            re.compile(pattern)
        except re.error as exc:
            raise RedactConfigError(f"redaction config {path}: pattern {name!r}: {exc}") from exc
    return UserRules(dict(patterns), frozenset(allow))
