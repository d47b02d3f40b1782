"""What redaction looks for: secret key names, and the shapes of secret values in text.

Token shapes come from detect-secrets (Yelp's maintained secret scanner) where its patterns fit:
they are reviewed against real credential formats by people who track them, and importing them
means a fix there reaches us. Its plugins are line scanners for source code; for trace text we
add what they lack: Anthropic keys, current OpenAI keys (``sk-proj-``; detect-secrets only knows
the legacy ``T3BlbkFJ`` ones), Google API keys, fine-grained GitHub tokens, whole PEM blocks (it
flags only the BEGIN line), ``Authorization: Bearer/Basic`` values, sensitive query parameters
and ``NAME=value`` / ``"name": "value"`` pairs in text whose name is a secret's.

A match of a token rule is extended to the end of its token: detect-secrets' fixed lengths
(Stripe's 24 characters, GitHub's 36) would otherwise leave the tail of a longer key behind.
Each rule has *tells*: case-folded substrings that every text it matches contains, so text with
none of them is cleared by one pass of a multi-literal matcher (``screen.py``) before any regular
expression runs (MB/s).
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.stripe import StripeDetector

__all__ = ["Rule", "RULES", "KEY_TELLS", "is_secret_key", "is_secret_under", "key_words", "key_value_in_text",
           "looks_like_code", "TOKEN_CHARS"]


@dataclass(frozen=True)
class Rule:
    """A value rule: ``regex`` finds it, group ``group`` is the secret, ``tells`` rule text out."""

    name: str
    regex: re.Pattern[str]
    tells: tuple[str, ...]
    group: int = 0
    extend: bool = True  # grow the match to the end of its token
    check: Callable[[str], bool] | None = None  # a secret-shaped match that is not one is kept


def _basic_credentials(value: str) -> bool:
    """``Basic`` followed by base64 of ``user:password``; not the word "basic" in prose."""
    try:
        return b":" in base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False


def _from(detector: type, index: int, name: str, tells: tuple[str, ...], group: int = 0) -> Rule:
    return Rule(name, detector.denylist[index], tells, group)


_GITLAB_TELLS = ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-",
                 "glagent-", "gloas-")

RULES: tuple[Rule, ...] = (
    Rule("private_key", re.compile(
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"),
        ("-----begin",), extend=False),
    Rule("anthropic_key", re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}"), ("sk-ant-",)),
    Rule("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), ("sk-",)),
    _from(OpenAIDetector, 0, "openai_key", ("t3blbkfj",)),
    _from(AWSKeyDetector, 0, "aws_access_key", ("a3t", "abia", "acca", "akia", "asia")),
    # AWS secret keys have no shape of their own (40 base64 characters): only next to "aws" and a
    # key word (detect-secrets), or under a secret key name (the key rules).
    _from(AWSKeyDetector, 1, "aws_secret", ("aws",), group=1),
    Rule("github_token", GitHubTokenDetector.denylist[0], ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Rule("github_token", re.compile(r"github_pat_[A-Za-z0-9_]{22,}"), ("github_pat_",)),
    *(Rule("gitlab_token", p, _GITLAB_TELLS) for p in GitLabTokenDetector.denylist),
    _from(SlackDetector, 0, "slack_token", ("xox",)),
    _from(SlackDetector, 1, "slack_webhook", ("hooks.slack.com",)),
    Rule("stripe_key", StripeDetector.denylist[0], ("k_live_",)),
    Rule("stripe_key", re.compile(r"\b(?:sk|rk|pk)_test_[0-9a-zA-Z]{24,}"), ("k_test_",)),
    Rule("google_api_key", re.compile(r"AIza[0-9A-Za-z_\-]{35}"), ("aiza",)),
    Rule("jwt", JwtTokenDetector.denylist[0], ("eyj",)),
    _from(BasicAuthDetector, 0, "url_userinfo", ("://",), group=1),
    Rule("bearer", re.compile(r"(?i:\bbearer\s+)([A-Za-z0-9._~+/\-]{8,}=*)"), ("bearer",), group=1),
    Rule("basic_auth", re.compile(r"(?i:\bbasic\s+)([A-Za-z0-9+/]{8,}={0,2})"), ("basic",), group=1,
         extend=False, check=_basic_credentials),
)

# The characters a token goes on with (a match is grown over them, see ``extend``).
TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

# Words that make a key name a secret's, once the name is split into words (``key_words``), and
# pairs of adjacent words that do.
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "pwd", "pass", "secret", "secrets", "token", "apikey", "auth",
    "authorization", "cookie", "cookies", "credential", "credentials", "privatekey", "sessionid", "jwt", "bearer",
    "xapikey", "setcookie", "accesskey", "secretkey", "clientsecret",
})
_SECRET_PAIRS = frozenset({
    ("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"), ("session", "id"),
    ("client", "secret"), ("signing", "key"), ("encryption", "key"), ("master", "key"), ("account", "key"),
    ("session", "key"), ("auth", "key"), ("set", "cookie"),
})
_COUNT_PAIRS = frozenset({("token", "count"), ("token", "counts"), ("token", "usage"), ("tokens", "count")})
# Run-together names: ``csrftoken``, ``dbpassword``, ``MYAPIKEY``.
_SECRET_ENDINGS = ("password", "passwd", "token", "secret", "apikey", "sessionid")
# Every secret key name, case-folded, contains one of these.
KEY_TELLS = ("pass", "pwd", "secret", "token", "key", "auth", "cookie", "credential", "session", "jwt", "bearer")

# Names of places, not secrets. A name whose last word is a place word (``PASSWORD_STORE_DIR``,
# ``TOKEN_PATH``, ``DB_PASSWORD_FILE``, ``SSH_AUTH_SOCK``) holds where a secret is kept, not the
# secret: a path, whose every later mention (each file an agent reads under it) would otherwise be
# redacted too. A secret-shaped value under such a name is still found by the token rules.
_PLACE_WORDS = frozenset({"dir", "dirs", "directory", "path", "paths", "file", "files", "home", "sock", "socket"})
# The shell's working directories: "pwd" is also a password's abbreviation, so these two names are
# kept only when their value is a path (``{"pwd": "hunter2"}`` still goes).
_CWD_NAMES = frozenset({"pwd", "oldpwd"})
_PATH_VALUE = re.compile(r"(?:/|~(?:/|$)|[A-Za-z]:[\\/])[^\r\n\x00]{0,4096}")

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")


def key_words(name: str) -> list[str]:
    """``dbPassword``, ``DB_PASSWORD``, ``db-password``, ``X-DB-Password`` -> ``["db", "password"]``."""
    return [w for w in _NOT_ALNUM.split(_CAMEL.sub("_", name).casefold().replace("\u0131", "i")) if w]


@functools.lru_cache(maxsize=8192)
def is_secret_key(name: str) -> bool:
    """Whether values under the key ``name`` are secrets, whatever its case and separators. The
    last part of a dotted attribute name is what counts (``http.request.header.authorization``)."""
    words = key_words(name.rsplit(".", 1)[-1]) if "." in name else key_words(name)
    if any(p in _COUNT_PAIRS for p in zip(words, words[1:])):
        return False  # a token *count* or *usage* is not a token (LangChain's token_usage, token_count)
    if words and words[-1] in _PLACE_WORDS:
        return False  # where a secret is kept (``SECRETS_DIR``), not the secret
    return (bool(_SECRET_WORDS.intersection(words)) or any(p in _SECRET_PAIRS for p in zip(words, words[1:]))
            or any(w.endswith(_SECRET_ENDINGS) for w in words))


def is_secret_under(name: str, value: str) -> bool:
    """Whether the text ``value`` under the key ``name`` is a secret: ``is_secret_key``, except the
    shell's ``PWD`` and ``OLDPWD`` when they hold a path (a working directory, not a password)."""
    if not is_secret_key(name):
        return False
    return not (name.rsplit(".", 1)[-1].casefold() in _CWD_NAMES and _PATH_VALUE.fullmatch(value) is not None)


# ``name: value``, ``name=value``, ``"name": "value"`` and ``\"name\": \"value\"`` (JSON escaped
# inside a log line) in free text; ``_`` is part of a name, so ``DB_PASSWORD=x`` is one name.
# The value keeps its delimiters; only what is between them goes.
_KEY_VALUE = re.compile(
    r"""(?P<key>(?<![\w\-])[^\W\d][\w.\-]{0,80})(?P<close>\\*["']?)[ \t]*(?P<sep>[:=])(?!=)[ \t]*"""
    r"""(?:(?P<q>\\*"|')(?P<quoted>(?:(?!(?P=q))[^\r\n])*)(?P=q)|(?P<bare>[^\s"'\\,;&}\])<>]+))"""
)


def key_value_in_text() -> re.Pattern[str]:
    return _KEY_VALUE


# Unquoted values after a secret name that are code, not secrets: agents read source code, where
# ``token: str``, ``password=password``, ``token = state.push(`` and ``auth=None`` abound (measured
# on 45 MB of installed packages: these were most of the key-value matches).
_CODE_WORDS = frozenset({"str", "none", "bool", "int", "bytes", "true", "false", "null", "self", "optional", "any",
                         "undefined", "string", "dict", "list", "object"})
# A call (``state.push(``, ``getenv(``) or an attribute of an object that is plainly code (``self.x``).
_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(")
_CODE_OBJECTS = ("self.", "cls.", "os.", "settings.", "config.", "request.", "args.", "kwargs")


def looks_like_code(key: str, bare: str) -> bool:
    """Whether an unquoted value after a secret name is an identifier, type or call in code."""
    word = bare.rstrip("[(").casefold()
    return (word in _CODE_WORDS or word == key.casefold() or word.split("[", 1)[0] in _CODE_WORDS
            or _CALL.fullmatch(bare) is not None or word.startswith(_CODE_OBJECTS)
            or word.endswith(("_" + key.casefold(), key.casefold() + "s")))
