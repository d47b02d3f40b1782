"""What redaction leaves behind: the placeholder that names its rule, the count of where each rule
fired (``Hits``, the redaction manifest's source), and the way back for environment values.

Kept apart from the ``Redactor`` because these are read by those who never redact: the sink's rows
and the OTLP exporter summarise hits, replay restores ``env:`` placeholders from its environment,
and tests name the markers. A placeholder holds no quote or backslash, so it is safe inside any
string, JSON text included.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["FAILED", "TOO_DEEP", "Hits", "count_hit", "placeholder", "restore_env", "summarize"]

Hits = dict[tuple[str, str], int]  # (field path, rule) -> how many values it replaced there


def placeholder(rule: str) -> str:
    return f"[REDACTED:{rule}]"


FAILED = placeholder("redaction_failed")
TOO_DEEP = placeholder("too_deep")


def count_hit(hits: Hits | None, path: str, rule: str, n: int = 1) -> None:
    if hits is not None:
        hits[(path, rule)] = hits.get((path, rule), 0) + n


def restore_env(text: str, env: Mapping[str, str] | None = None) -> str:
    """Put ``env:`` secrets back from the environment (for a replay that needs them)."""
    env = os.environ if env is None else env
    return re.sub(r"\[REDACTED:env:([A-Za-z_][A-Za-z0-9_]*)\]",
                  lambda m: env.get(m.group(1), m.group(0)), text)


def summarize(hits: Hits) -> list[dict[str, Any]]:
    """Hits counted by rule, without paths (the span attribute ``looptrace.redactions``)."""
    by_rule: dict[str, int] = {}
    for (_, rule), n in hits.items():
        by_rule[rule] = by_rule.get(rule, 0) + n
    return [{"rule": rule, "count": n} for rule, n in sorted(by_rule.items())]
