"""The redaction screen finds the same tells with Hyperscan as with one substring test per tell."""

from __future__ import annotations

import random
import string

import pytest

from looptrace.tracer.sink import Redactor
from looptrace.tracer.sink.screen import HYPERSCAN, Screen

from .secret_corpus import corpus

TELLS = Redactor()._tells  # noqa: SLF001 - the redactor's own list, whatever it holds

TEXTS = [
    "",
    "def main():\n    return compute(load('config.yaml'))\n" * 30,
    '{"max_tokens": 1024, "usage": {"input_tokens": 5, "output_tokens": 7}}',  # "tokens" only: no tell
    "csrf_token=abc",  # "token" not followed by "s"
    "tokenstoken",  # a "tokens" and a "token" at the very end
    "tokens token",
    "the password is in the Keychain",
    "ünïcödé text with a pass-through and \u0131 dotless",
    "lone surrogate \ud800 then sk-ant-x",
    "Authorization: Bearer abc",
    "x" * 5000 + "ghp_" + "y" * 5000,
    *(p.text for p in corpus(random.Random(26))),
]


@pytest.mark.skipif(not HYPERSCAN, reason="no Hyperscan wheel on this platform: only the substring tests run")
@pytest.mark.parametrize("text", TEXTS)
def test_hyperscan_finds_what_substring_tests_find(text: str) -> None:
    folded = text.casefold()
    fast, plain = Screen(TELLS), Screen(TELLS, use_hyperscan=False)
    assert fast.present(folded) == plain.present(folded)
    assert fast.any(folded) == plain.any(folded) == bool(plain.present(folded))


def test_substring_screen_on_known_texts() -> None:
    plain = Screen(TELLS, use_hyperscan=False)
    assert plain.present('{"max_tokens": 1024}') == set()
    assert plain.present("csrf_token=abc") == {"token"}
    assert plain.present("tokenstoken") == {"token"}
    assert {"pass", "key"} <= plain.present("the password is in the keychain")


@pytest.mark.skipif(not HYPERSCAN, reason="no Hyperscan wheel on this platform")
def test_random_texts_agree() -> None:
    rng = random.Random(2026)
    fast, plain = Screen(TELLS), Screen(TELLS, use_hyperscan=False)
    alphabet = string.ascii_lowercase[:12] + "_-:/ ks"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 60)))
        text += rng.choice(TELLS) if rng.random() < 0.5 else ""
        text += "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 4)))
        assert fast.present(text) == plain.present(text), text


def test_a_text_redacted_again_gives_the_same_text_and_hits_at_its_own_path() -> None:
    """Redacted texts are remembered (a resent history comes through the sink again and again): the
    second time must replace the same secrets and count them under the second path."""
    text = "log line\nexport DB_PASSWORD=hunter2hunter2\nAuthorization: Bearer abcdefgh12345678\n" * 2
    fresh, memo = Redactor(env={}), Redactor(env={})
    first: dict[tuple[str, str], int] = {}
    second: dict[tuple[str, str], int] = {}
    out = memo.text(text, first, "a")
    again = memo.text(text, second, "b")
    expected: dict[tuple[str, str], int] = {}
    assert again == out == fresh.text(text, expected, "a")
    assert "hunter2hunter2" not in again and "abcdefgh12345678" not in again
    assert first == expected and first and second == {("b", rule): n for (_, rule), n in first.items()}
