"""Turning whatever an agent hands us into text and JSON that every exporter can store.

Agents pass bytes that are not UTF-8, strings with lone surrogates (from ``surrogateescape`` or
bad JSON), and tool arguments that are not JSON-serialisable. None of that may raise into the
agent, and none of it may be silently dropped: bad code points become U+FFFD, unknown objects
become their ``repr``.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

from .unicode import SURROGATE as _SURROGATE
from .unicode import clean_text

__all__ = ["clean_text", "to_json", "canonical_json", "plain"]


def _plain(value: Any) -> Any:
    """A JSON-compatible copy of ``value``: text cleaned, unknown objects as their repr."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (str, bytes, bytearray, memoryview)):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if not isinstance(k, str) else clean_text(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    dump = getattr(value, "model_dump", None)  # pydantic models, e.g. anthropic SDK types
    if callable(dump):
        try:
            return _plain(dump(mode="json", exclude_none=True))
        except Exception:  # noqa: BLE001 - a broken model still gets recorded as its repr
            pass
    return clean_text(repr(value))


# Types orjson would encode its own way: sent to the stdlib path, which spells them as before.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
_COMPACT = (",", ":")  # as orjson writes, so both paths give the same text


def to_json(value: Any) -> str:
    """JSON text for ``value``, never raising."""
    # The exporter encodes a few values per span, so this is hot: orjson is 10x faster than the
    # stdlib. It refuses lone surrogates, big ints and unknown objects, which the stdlib path then
    # handles; it writes NaN as null, so text with a null in it is encoded again the stdlib way
    # (span attributes cannot be None, so the exporter's values rarely get there).
    try:
        raw = orjson.dumps(value, option=_ORJSON_OPTIONS)
        if b"null" not in raw:
            return raw.decode()
    except TypeError:  # orjson.JSONEncodeError is one
        pass
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=_COMPACT)
        if not _SURROGATE.search(text):
            return text
    except (TypeError, ValueError):
        pass
    return json.dumps(_plain(value), ensure_ascii=False, separators=_COMPACT)


def plain(value: Any) -> Any:
    """A JSON-compatible copy of ``value`` (what ``canonical_json`` serialises)."""
    return _plain(value)


def canonical_json(value: Any) -> str:
    """Sorted-key compact JSON: equal values give equal text, for hashing and comparing actions."""
    return json.dumps(_plain(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
