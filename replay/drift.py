"""Where a replayed request departs from the recorded one, as a readable diff (pure functions)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["describe_drift"]


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False, default=str).splitlines()


def _diff(label: str, old: Any, new: Any, max_lines: int) -> str:
    lines = list(difflib.unified_diff(_pretty(old), _pretty(new), f"recorded {label}", f"replayed {label}",
                                      lineterm="", n=2))
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... {len(lines) - max_lines} more diff lines"]
    return "\n".join(lines)


def describe_drift(recorded: Mapping[str, Any], replayed: Mapping[str, Any], *, max_lines: int = 40) -> str:
    """What changed between two requests: system prompt, tool list, parameters, or the first message."""
    parts = []
    if recorded.get("system") != replayed.get("system"):
        parts.append("the system prompt changed:\n" + _diff("system", recorded.get("system"), replayed.get("system"),
                                                             max_lines))
    old_tools, new_tools = recorded.get("tools") or [], replayed.get("tools") or []
    if old_tools != new_tools:
        names_old = [t.get("name") for t in old_tools]
        names_new = [t.get("name") for t in new_tools]
        what = (f"tools {names_old} became {names_new}" if names_old != names_new
                else "a tool's description or schema changed")
        parts.append(f"the tool list changed ({what}):\n" + _diff("tools", old_tools, new_tools, max_lines))
    others = sorted(k for k in set(recorded) | set(replayed) if k not in ("system", "tools", "messages"))
    changed = [k for k in others if recorded.get(k) != replayed.get(k)]
    if changed:
        parts.append("parameters changed: " + ", ".join(f"{k} {recorded.get(k)!r} -> {replayed.get(k)!r}"
                                                        for k in changed))
    old_msgs, new_msgs = list(recorded.get("messages") or []), list(replayed.get("messages") or [])
    for i, (a, b) in enumerate(zip(old_msgs, new_msgs)):
        if a != b:
            parts.append(f"message {i + 1} ({a.get('role')}) changed:\n" + _diff(f"message {i + 1}", a, b, max_lines))
            break
    else:
        if len(old_msgs) != len(new_msgs):
            parts.append(f"the conversation has {len(new_msgs)} messages instead of {len(old_msgs)}")
    return "\n".join(parts) or "the requests differ only in encoding"
