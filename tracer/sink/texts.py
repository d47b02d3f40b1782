"""Texts as the redactor's screens read them: pure functions over plain strings and structures.

Split from ``redact.py`` (the rules applied); these decide what a screen looks at: the case-folded
text every tell is searched in, a value as it appears inside JSON text, and the texts of a value
nested too deep to walk by recursion.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

__all__ = ["fold", "json_escaped", "leaf_texts", "looks_json"]


_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def leaf_texts(value: Any) -> Iterator[str]:
    """Every text in ``value`` as a user's pattern would see it, without recursion (the nesting is
    too deep for it): the keys and strings of a structure, the string literals of JSON text."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and looks_json(item):
            for literal in _JSON_STRING.findall(item):
                try:
                    yield json.loads(f'"{literal}"')
                except ValueError:
                    yield literal
        elif isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(k for k in item if isinstance(k, str))
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


def looks_json(text: str) -> bool:
    return text.lstrip()[:1] in ('{', '[', '"')


def fold(text: str) -> str:
    """``text`` case-folded so that every match of a case-insensitive pattern with ASCII letters
    has those letters, lower-case, in it."""
    folded = text.casefold()
    if not text.isascii() and "\u0131" in folded:
        # The one letter Python's case-insensitive matching equates with an ASCII one ("i") that
        # case folding leaves alone: the dotless i.
        folded = folded.replace("\u0131", "i")
    return folded


def json_escaped(value: str) -> str | None:
    """``value`` as it appears inside a JSON string written by orjson (None: it cannot appear)."""
    try:
        return orjson.dumps(value).decode()[1:-1]
    except TypeError:
        return None  # a lone surrogate: orjson refuses such text, so no blob holds it
