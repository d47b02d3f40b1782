"""Redaction: secrets never reach a store file or an exporter.

Applied at the one place every span passes before it is written or sent (the exporters), to text
and to structures: values under secret-looking keys, well-known token shapes, and the current
values of secret environment variables. Each replacement is a placeholder naming its rule
(``[REDACTED:env:ANTHROPIC_API_KEY]``), and what was redacted, by which rule, is recorded on the span
without the value, so a replay can restore ``env:`` secrets from its own environment.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import orjson

__all__ = ["Redactor", "DEFAULT_PATTERNS", "SECRET_KEY", "placeholder", "restore_env"]

log = logging.getLogger("looptrace.redact")

# Keys whose values are secrets, wherever they appear (JSON arguments, headers, attributes). A token
# *count* or *usage* is not a token (OpenInference's llm.token_count.prompt, LangChain's token_usage).
SECRET_KEY = re.compile(
    r"(?i)(^|[_.\-])(api[_\-]?key|x[_\-]api[_\-]key|token(?![_.\-](?:count|usage)(?:$|[_.\-]))|access[_\-]?token|refresh[_\-]?token|secret|"
    r"client[_\-]?secret|password|passwd|pwd|authorization|auth|cookie|set[_\-]cookie|session[_\-]?id|"
    r"private[_\-]?key)($|[_.\-])"
)

DEFAULT_PATTERNS: dict[str, str] = {
    "anthropic_key": r"sk-ant-[A-Za-z0-9_\-]{8,}",
    "openai_key": r"sk-(?:proj-)?[A-Za-z0-9_\-]{20,}",
    "bearer": r"\b(?i:bearer)\s+[A-Za-z0-9_\-\.=+/]{8,}",
    "aws_access_key": r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    "aws_secret": r"(?i:aws_secret_access_key)\s*[=:]\s*[A-Za-z0-9/+=]{40}",
    "github_token": r"\bgh[pousr]_[A-Za-z0-9]{30,}\b",
    "private_key": r"-----BEGIN (?:[A-Z ]+ )?PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z ]+ )?PRIVATE KEY-----",
    "jwt": r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\b",
}

# ``key: value`` / ``"key": "value"`` / ``key=value`` inside free text (HTTP headers, env dumps, JSON
# embedded in a log line): the key stays, the value goes.
_KEY_VALUE_IN_TEXT = re.compile(
    r"""(?i)(["']?\b(?:x-api-key|api[_-]?key|access[_-]?token|refresh[_-]?token|auth[_-]?token|token|secret|"""
    r"""client[_-]?secret|password|passwd|authorization|proxy-authorization|cookie|set-cookie|session[_-]?id)"""
    r"""["']?\s*[:=]\s*)("[^"\r\n]*"|'[^'\r\n]*'|[^\s"',}\r\n][^\r\n,}"]*)"""
)

# A cheap test for JSON text that may hold a secret-looking key, before parsing it.
_JSON_SECRET_KEY = re.compile(r'(?i)"[^"]{0,40}(key|token|secret|passw|pwd|auth|cookie|session)[^"]{0,40}"\s*:')
_ENV_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)")
_MIN_ENV_VALUE = 8  # shorter values ("1", "true") would redact ordinary text

# Substrings (case-folded) that every match of a default rule contains, and every secret key-value
# pair in text (``_KEY_VALUE_IN_TEXT``'s key names): text with none of them needs no regex at all.
_TELLS: dict[str, tuple[str, ...]] = {
    "anthropic_key": ("sk-",),
    "openai_key": ("sk-",),
    "bearer": ("bearer",),
    "aws_access_key": ("akia", "asia"),
    "aws_secret": ("aws_secret_access_key",),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "private_key": ("-----begin ",),
    "jwt": ("eyj",),
}
_KEY_VALUE_TELLS = ("api-key", "api_key", "apikey", "token", "secret", "passw", "authorization", "cookie",
                    "session")
# The words ``_JSON_SECRET_KEY`` looks for in a key, without its quotes (escaped in a JSON blob).
_JSON_SECRET_WORDS = ("key", "token", "secret", "passw", "pwd", "auth", "cookie", "session")


# Attributes whose values looptrace generates itself (ids, hashes, enums, numbers): never secrets.
SAFE_KEYS = frozenset({
    "looptrace.run.id", "looptrace.run.parent_id", "looptrace.run.source", "looptrace.run.status",
    "looptrace.run.strategy", "looptrace.run.replay_of", "looptrace.run.forked_from", "looptrace.request.sha",
    "looptrace.request.system_sha", "looptrace.request.tools_sha", "looptrace.request.base_call_id",
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.response.finish_reasons", "gen_ai.response.id",
    "gen_ai.tool.call.id", "error.type",
})


def placeholder(rule: str) -> str:
    return f"[REDACTED:{rule}]"


@dataclass
class Redactor:
    """Redacts text and structures. ``callback(text) -> text`` runs last; if it raises, the whole
    value becomes a placeholder (fail closed) and one warning is logged."""

    patterns: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_PATTERNS))
    extra_patterns: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] | None = None  # default: os.environ at construction
    callback: Callable[[str], str] | None = None
    enabled: bool = True

    def __post_init__(self) -> None:
        env = os.environ if self.env is None else self.env
        self._env_values = sorted(
            ((name, value) for name, value in env.items()
             if _ENV_SECRET_NAME.search(name) and len(value) >= _MIN_ENV_VALUE),
            key=lambda item: -len(item[1]),
        )
        rules = {**self.patterns, **self.extra_patterns}
        self._names = list(rules)
        self._regex = re.compile("|".join(f"(?P<r{i}>{p})" for i, p in enumerate(rules.values()))) if rules else None
        # The cheap test that rules out most text: the default rules' tells as substrings; a rule
        # of the user's own has no known tell, so it is searched for itself.
        own = [p for name, p in rules.items() if DEFAULT_PATTERNS.get(name) != p]
        self._tells = tuple({t for name, p in rules.items() if DEFAULT_PATTERNS.get(name) == p
                             for t in _TELLS[name]} | set(_KEY_VALUE_TELLS))
        self._own = re.compile("|".join(f"(?:{p})" for p in own)) if own else None
        self._env_escaped = [escaped for _, v in self._env_values if (escaped := _json_escaped(v))]
        self._warned = False

    def text(self, value: str, hits: dict[str, int] | None = None) -> str:
        if not self.enabled or not value:
            return value
        if not self._may_hold(value):
            return self._callback(value, hits)
        if self._regex is not None and self._regex.search(value):
            def sub(m: re.Match[str]) -> str:
                rule = self._names[int(str(m.lastgroup)[1:])]
                _count(hits, rule)
                return placeholder(rule)

            value = self._regex.sub(sub, value)
        # Known token shapes before env values: an env value inside a token must not split it and
        # leave its ends behind.
        for name, secret in self._env_values:
            if secret in value:
                value = value.replace(secret, placeholder(f"env:{name}"))
                _count(hits, f"env:{name}")
        if _KEY_VALUE_IN_TEXT.search(value):
            def keep_key(m: re.Match[str]) -> str:
                if m.group(2).strip("\"'").startswith("[REDACTED:"):
                    return m.group(0)
                _count(hits, "secret_key")
                quote = m.group(2)[0] if m.group(2)[:1] in "\"'" else ""
                return f"{m.group(1)}{quote}{placeholder('secret_key')}{quote}"

            value = _KEY_VALUE_IN_TEXT.sub(keep_key, value)
        return self._callback(value, hits)

    def _may_hold(self, text: str, folded: str | None = None, env_values: Iterable[str] | None = None) -> bool:
        """False only if no rule, secret key-value pair or env secret can match in ``text``.

        Regular expressions that do not start with a literal scan at a few MB/s, so a 10 MB tool
        result would hold the exporter for seconds; substring tests of the case-folded text run
        at GB/s, and only text that fails them is searched properly.
        """
        folded = _fold(text) if folded is None else folded
        if env_values is None:
            env_values = (v for _, v in self._env_values)
        return (any(t in folded for t in self._tells) or any(v in text for v in env_values)
                or (self._own is not None and self._own.search(text) is not None))

    def may_redact(self, attribute_maps: Sequence[Mapping[str, Any]], texts: Iterable[str | None] = ()) -> bool:
        """False only if redacting every map (as ``attributes`` does) and every text would change
        nothing: one cheap test for a whole batch of spans, which rarely holds a secret."""
        if not self.enabled:
            return False
        if self.callback is not None or self._own is not None:
            return True  # the callback may change any text; the user's rules may anchor on a value's ends
        if any(_is_secret_attribute(k) for k in set().union(*attribute_maps).difference(SAFE_KEYS)):
            return True
        try:
            # Every value at once, as one JSON text: encoding in C is far cheaper than visiting the
            # values in Python. Escaping leaves the tells alone (letters, digits, "-", "_", space);
            # env values are looked for as escaped; keys are not in it (they are checked above).
            # One flat list, not one per span: thousands of small lists alive at once get promoted
            # by the cycle collector and bring on a full collection of the agent's heap.
            values = list(chain.from_iterable(m.values() for m in attribute_maps))
            if _structured(values):
                return True  # ``value`` walks structures, checking their keys: look at each one
            values.extend(t for t in texts if t)
            blob = orjson.dumps(values).decode()
        except TypeError:
            return True  # a value orjson refuses (a lone surrogate, an object): look at each one
        folded = _fold(blob)
        if self._may_hold(blob, folded, self._env_escaped):
            return True
        # ``value`` walks JSON text whose keys look secret; JSON text shows up as "{ or "[ here.
        return ('"{' in blob or '"[' in blob) and any(w in folded for w in _JSON_SECRET_WORDS)

    def _callback(self, value: str, hits: dict[str, int] | None) -> str:
        if self.callback is not None:
            try:
                value = self.callback(value)
            except Exception as exc:  # noqa: BLE001 - fail closed, keep the agent running
                _count(hits, "callback_failed")
                if not self._warned:
                    self._warned = True
                    log.warning("looptrace: the redaction callback raised %s; values are replaced whole", exc)
                return placeholder("callback_failed")
        return value

    def value(self, value: Any, hits: dict[str, int] | None = None, key: str | None = None) -> Any:
        """A copy of ``value`` with secrets redacted; JSON text is redacted as JSON (keys included)."""
        if not self.enabled:
            return value
        if key is not None and _is_secret_key(key) and value not in (None, "", [], {}):
            _count(hits, "secret_key")
            return placeholder("secret_key")
        if isinstance(value, str):
            if value[:1] not in "{[":
                return self.text(value, hits)
            if not _JSON_SECRET_KEY.search(value):
                trial: dict[str, int] = {}
                redacted = self.text(value, trial)
                if redacted == value or _is_json(redacted):
                    for rule, n in trial.items():
                        _count(hits, rule, n)
                    return redacted
            # JSON text whose keys may hold secrets, or that text redaction would break: walk it.
            try:
                parsed = json.loads(value)
            except ValueError:
                return self.text(value, hits)
            return json.dumps(self.value(parsed, hits), ensure_ascii=False)
        if isinstance(value, Mapping):
            return {k: self.value(v, hits, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v, hits) for v in value) if isinstance(value, tuple) else \
                [self.value(v, hits) for v in value]
        return value

    def attributes(self, attrs: Mapping[str, Any], hits: dict[str, int]) -> dict[str, Any]:
        return {k: v if k in SAFE_KEYS or not isinstance(v, (str, list, tuple, dict)) else
                self.value(v, hits, _leaf(k)) for k, v in attrs.items()}


@functools.lru_cache(maxsize=4096)
def _is_secret_key(key: str) -> bool:
    return SECRET_KEY.search(key) is not None


_PLAIN = frozenset({str, int, float, bool, type(None)})
_SEQUENCES = (list, tuple)


def _structured(values: list[Any]) -> bool:
    """Whether any value is more than plain text or numbers, or a sequence of them (found by type
    sets, in C: OpenTelemetry attributes are plain, so this is rarely true)."""
    types = set(map(type, values))
    if types <= _PLAIN:
        return False
    if types - _PLAIN - set(_SEQUENCES):
        return True
    return not set(map(type, chain.from_iterable(v for v in values if type(v) in _SEQUENCES))) <= _PLAIN


def _fold(text: str) -> str:
    """``text`` case-folded so that every match of a case-insensitive pattern with ASCII letters
    has those letters, lower-case, in it."""
    folded = text.casefold()
    if not text.isascii() and "\u0131" in folded:
        # The one letter Python's case-insensitive matching equates with an ASCII one ("i") that
        # case folding leaves alone: the dotless i.
        folded = folded.replace("\u0131", "i")
    return folded


def _json_escaped(value: str) -> str | None:
    """``value`` as it appears inside a JSON string written by orjson (None: it cannot appear)."""
    try:
        return orjson.dumps(value).decode()[1:-1]
    except TypeError:
        return None  # a lone surrogate: orjson refuses such text, so no blob holds it


@functools.lru_cache(maxsize=4096)
def _is_secret_attribute(attribute_key: str) -> bool:
    return _is_secret_key(_leaf(attribute_key))


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def _leaf(attribute_key: str) -> str:
    """``http.request.header.authorization`` -> ``authorization``; ``gen_ai.usage.input_tokens`` stays
    harmless because only the last part is matched against secret key names."""
    return attribute_key.rsplit(".", 1)[-1]


def _count(hits: dict[str, int] | None, rule: str, n: int = 1) -> None:
    if hits is not None:
        hits[rule] = hits.get(rule, 0) + n


def restore_env(text: str, env: Mapping[str, str] | None = None) -> str:
    """Put ``env:`` secrets back from the environment (for a replay that needs them)."""
    env = os.environ if env is None else env
    return re.sub(r"\[REDACTED:env:([A-Za-z_][A-Za-z0-9_]*)\]",
                  lambda m: env.get(m.group(1), m.group(0)), text)


def summarize(hits: Mapping[str, int]) -> Iterable[dict[str, Any]]:
    return [{"rule": rule, "count": n} for rule, n in sorted(hits.items())]
