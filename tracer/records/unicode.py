"""Any value as valid Unicode text: the one normalisation that printing needs as well as storing.

Apart from ``text.py`` (which imports orjson, and with it dataclasses and inspect) so that a
command that only prints, like ``looptrace sql``, starts without them.
"""

from __future__ import annotations

import re

__all__ = ["clean_text", "SURROGATE"]

SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: object) -> str:
    """``value`` as valid Unicode text (lone surrogates and undecodable bytes become U+FFFD)."""
    if isinstance(value, str):
        if value.isascii():  # known without a scan: CPython keeps the flag
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return SURROGATE.sub("\ufffd", value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return clean_text(str(value))
