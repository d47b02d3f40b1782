"""The analyzer's query drops a last step's text only when no end or crash marker can be in it.

``MAY_MARK_SQL`` (markers.py) runs in DuckDB's RE2; the markers are searched in Python's ``re``. It must
keep every text Python would find a marker in: every example of every format, the spacing only Python
calls space, and any text with a non-ASCII character.
"""

from __future__ import annotations

import duckdb
import pytest

from looptrace.replay.analyzer.ending import crash_text
from looptrace.replay.analyzer.markers import ERROR_MARKERS, MAY_MARK_SQL, MARKERS, find_markers

from .test_markers import EXAMPLES

CRASHES = ["Traceback (most recent call last):\n  File \"x.py\"", "  pkg.mod.KeyError: 'a'", "ValueError: bad",
           "Unhandled exception in thread", "FATAL ERROR in runtime",
           "Error processing publish message for Coder_1/default"]
# Python's \s also matches \v and \x1c-\x1f; what it calls a word or a digit beyond ASCII RE2 does not.
TRICKY = ["The chart is saved.\nTERMINATE\x0b\x1c", "\x1e\x1fValueError: x", "ValueError:\x1c\x0bx",
          "Max rounds (\u0663) reached", "agent reached maxımum iteration", "naïve\nSubmitted"]


def _kept(texts: list[str]) -> list[bool]:
    conn = duckdb.connect()
    sql = f"SELECT {MAY_MARK_SQL.format(text='t')} FROM unnest(?::VARCHAR[]) WITH ORDINALITY u(t, i) ORDER BY i"
    return [bool(r[0]) for r in conn.execute(sql, [texts]).fetchall()]


def _python_finds(text: str) -> bool:
    return bool(find_markers([("step 1", text)])) or crash_text(text) is not None


@pytest.mark.parametrize("prefix", ["", "some output before it\n", "\t \x0c"])
def test_every_text_python_finds_a_marker_in_is_kept(prefix: str) -> None:
    texts = [prefix + t for t in [*(e[2] for e in EXAMPLES), *CRASHES, *TRICKY]]
    found = [t for t in texts if _python_finds(t)]
    assert len(found) >= len(EXAMPLES) + len(CRASHES) + 3  # the examples do hold markers
    assert all(_kept(found)), [t for t, k in zip(found, _kept(found)) if not k]
    assert {m for m in (*MARKERS, *ERROR_MARKERS) for t in found if m.compiled().search(t)} == {
        *MARKERS, *ERROR_MARKERS}


def test_ordinary_ascii_text_is_dropped_and_non_ascii_kept() -> None:
    ordinary = ["contents of file 3 xxxx", "thinking about step 12", "exit_code 0", "I will submit it later"]
    assert not any(_python_finds(t) for t in ordinary)
    assert _kept(ordinary) == [False] * len(ordinary)
    assert _kept(["caf\u00e9 au lait"]) == [True]  # not ASCII: always searched in Python
