"""The runs filter language: ``status:stagnated label:cap_hit agent:demo model:scripted words``.

A pure parser, so the syntax is unit-tested without a terminal. Repeating a key ORs its values
(``status:ok status:error``); different keys AND; free words must all appear in the task (or be
the start of a run id). ``status`` and ``label`` match exactly, ``agent`` and ``model`` match a
part of the name, all ignoring case. The values only ever reach SQL as parameters.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

__all__ = ["RunFilter", "parse_filter", "FILTER_KEYS"]

FILTER_KEYS = ("status", "label", "agent", "model")


@dataclass(frozen=True)
class RunFilter:
    statuses: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()  # what could not be understood, for the status line

    @property
    def active(self) -> bool:
        return bool(self.statuses or self.labels or self.agents or self.models or self.words)


def _tokens(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an unclosed quote while the user is still typing
        return text.replace('"', "").replace("'", "").split()


def parse_filter(text: str) -> RunFilter:
    values: dict[str, list[str]] = {k: [] for k in FILTER_KEYS}
    words: list[str] = []
    errors: list[str] = []
    for token in _tokens(text):
        key, sep, value = token.partition(":")
        if sep and key.lower() in values:
            if value:
                values[key.lower()].append(value.lower())
            else:
                errors.append(f"{key}: needs a value")
        elif sep and key and key.isidentifier():
            errors.append(f"unknown filter {key}: (use {', '.join(k + ':' for k in FILTER_KEYS)})")
        else:
            words.append(token.lower())
    return RunFilter(
        statuses=tuple(values["status"]), labels=tuple(values["label"]), agents=tuple(values["agent"]),
        models=tuple(values["model"]), words=tuple(words), errors=tuple(errors),
    )
