"""``Redactor.leaves_alone``: one screen over a value's JSON that says redaction would change nothing.

The instrumentor relies on it on the agent's thread (``value_or_same``), so it may only ever answer
True for a value that ``value`` gives back equal; the oracle is ``value`` itself and the planted
corpus, never the screen.
"""

from __future__ import annotations

import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from looptrace.tracer.sink import Redactor

from .secret_corpus import corpus, env_for

N_KINDS = len(corpus(random.Random(0)))

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=20,
)


def _message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": text}]}


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_a_value_it_leaves_alone_comes_back_equal(value: Any) -> None:
    redactor = Redactor(env={})
    if redactor.leaves_alone(value):
        assert redactor.value(value) == value
        assert redactor.value_or_same(value) is value


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32), kind=st.integers(0, N_KINDS - 1), as_key=st.booleans())
def test_no_planted_secret_is_left_alone(seed: int, kind: int, as_key: bool) -> None:
    planted = corpus(random.Random(seed))
    p = planted[kind]
    redactor = Redactor(env=env_for(planted))
    message = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "http",
                                                 "input": {"headers": {"x": p.text}} if not as_key else
                                                 {"password": p.secret}}]}
    assert not redactor.leaves_alone(message)
    assert p.secret not in json.dumps(redactor.value_or_same(message))


def test_ordinary_messages_are_left_alone_and_not_copied() -> None:
    redactor = Redactor(env={})
    message = _message("contents of src/mod1.py\n" + "y" * 600)
    assert redactor.leaves_alone(message)
    assert redactor.value_or_same(message) is message


def test_what_the_screen_cannot_vouch_for_goes_through_value() -> None:
    """A callback, a user pattern, bytes, non-text keys and nesting as deep as the walk's cut."""
    ordinary = _message("nothing here")
    assert not Redactor(env={}, callback=lambda t: t.upper()).leaves_alone(ordinary)
    assert not Redactor(env={}, extra_patterns={"ticket": r"TICKET-\d+"}).leaves_alone(_message("TICKET-1"))
    plain = Redactor(env={})
    assert not plain.leaves_alone({"body": b"bytes"})
    assert not plain.leaves_alone({1: "a non-text key"})
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]
    assert not plain.leaves_alone(deep)
    assert plain.leaves_alone(deep[0][0])  # 198 levels: within the walk's reach, nothing to cut
