"""Redaction: secrets never reach a store file or an exporter.

Applied by the sink to every text value of every record (and by the OTLP exporter to what leaves
the process). Three kinds of rule (``rules.py``): values under secret key names (any case and
separator, at any depth), well-known token shapes in text, and the current values of secret
environment variables. Each replacement is a placeholder naming its rule
(``[REDACTED:env:ANTHROPIC_API_KEY]``); where each fired (field path and rule, never the value) is
returned in ``hits`` for the redaction manifest.

Structure is preserved: JSON text is parsed, its values (and keys) redacted, and re-encoded, never
matched as encoded text, so a redacted value is valid wherever the original was. A placeholder holds
no quote or backslash, so it is safe inside any string. Redaction fails closed: a value whose
redaction raises, or JSON too deep to walk that may hold a secret, becomes a marker, never raw.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import orjson

from .config import load_config
from .placeholders import FAILED, TOO_DEEP, Hits, count_hit, placeholder, restore_env, summarize
from .rules import (KEY_TELLS, RULES, TOKEN_CHARS, Rule, is_secret_key, is_secret_under, key_value_in_text,
                    looks_like_code)
from .screen import screen_for
from .texts import fold, json_escaped, leaf_texts, looks_json

__all__ = ["Redactor", "Hits", "SAFE_KEYS", "placeholder", "restore_env", "summarize"]

log = logging.getLogger("looptrace.redact")

_MIN_ENV_VALUE = 8  # shorter values ("1", "true") would redact ordinary text
_SHORT = 40  # text shorter than this is searched for tells by one regex, longer by substring tests
# Texts that needed the rules are remembered with their result: an agent resends its history, and a
# sliding window of it is recorded whole on every call, so the same message text (a tool result
# holding a password) came through the rules again and again. Bounded by characters held.
_MEMO_MIN, _MEMO_CHARS = 64, 8 << 20
_MAX_DEPTH = 200  # deeper JSON is cut with a marker if it may hold a secret (the walk is recursive)

# Attributes whose values looptrace generates itself (ids, hashes, enums, numbers): never secrets.
SAFE_KEYS = frozenset({
    "looptrace.run.id", "looptrace.run.parent_id", "looptrace.run.source", "looptrace.run.status",
    "looptrace.run.strategy", "looptrace.run.replay_of", "looptrace.run.forked_from", "looptrace.request.sha",
    "looptrace.request.system_sha", "looptrace.request.tools_sha", "looptrace.request.base_call_id",
    "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.response.finish_reasons", "gen_ai.response.id",
    "gen_ai.tool.call.id", "error.type",
})


_KEY_TELL = re.compile("|".join(KEY_TELLS), re.IGNORECASE)


@dataclass
class Redactor:
    """Redacts text and structures.

    ``extra_patterns`` (name -> regex) and ``allow`` (values never redacted) come from the user; by
    default also from the TOML file named by ``LOOPTRACE_REDACT_CONFIG`` (see ``config.py``).
    ``callback(text) -> text`` runs last; if it raises, the whole value becomes a placeholder and
    one warning is logged.
    """

    extra_patterns: Mapping[str, str] = field(default_factory=dict)
    allow: Iterable[str] = ()
    env: Mapping[str, str] | None = None  # default: os.environ at construction
    callback: Callable[[str], str] | None = None
    enabled: bool = True
    config: str | None = None  # a TOML file; default: $LOOPTRACE_REDACT_CONFIG

    def __post_init__(self) -> None:
        env = os.environ if self.env is None else self.env
        user = load_config(self.config if self.config is not None else os.environ.get("LOOPTRACE_REDACT_CONFIG"))
        self._allow = frozenset(self.allow) | user.allow
        self._env_values = sorted(
            ((name, value) for name, value in env.items()
             if is_secret_under(name, value) and len(value) >= _MIN_ENV_VALUE and value not in self._allow),
            key=lambda item: -len(item[1]),
        )
        own = {**user.patterns, **self.extra_patterns}
        self._own = [Rule(name, re.compile(p), (), extend=False) for name, p in own.items()]
        self._tells = tuple(sorted(set(chain.from_iterable(r.tells for r in RULES)) | set(KEY_TELLS)))
        self._screen = screen_for(self._tells)  # every tell in one pass over a long text
        # For very short text (ids, names, numbers as text: most values) one regex call is cheaper
        # than the screen's call into Hyperscan; past a few dozen characters the screen wins, since
        # the alternation tries every position whose letter starts some tell (measured).
        self._tell_re = re.compile("|".join("token(?!s)" if t == "token" else re.escape(t)
                                            for t in sorted(self._tells, key=len, reverse=True)))
        self._env_escaped = [escaped for _, v in self._env_values if (escaped := json_escaped(v))]
        self._warned = False
        self._memo: dict[str, tuple[str, tuple[tuple[str, int], ...]]] = {}  # text -> (redacted, rule counts)
        self._memo_chars = 0  # approximate under threads: no lock (none to be left held by a fork)

    # -- text ----------------------------------------------------------------------------------

    def text(self, value: str, hits: Hits | None = None, path: str = "") -> str:
        """``value`` with every secret in it replaced (fails closed: a marker if redaction raises)."""
        if not self.enabled or not value:
            return value
        try:
            remembered = self._memo.get(value) if len(value) >= _MEMO_MIN else None
            if remembered is not None:
                value, counts = remembered
                for rule, n in counts:
                    count_hit(hits, path, rule, n)
            elif self._may_hold(value):
                value = self._remembered(value, hits, path)
        except Exception:  # noqa: BLE001 - never raw: a value that could not be redacted goes whole
            self._warn("a redaction rule raised")
            count_hit(hits, path, "redaction_failed")
            return FAILED
        return self._callback(value, hits, path)

    def _remembered(self, value: str, hits: Hits | None, path: str) -> str:
        """``_text`` of ``value``, remembered when long enough (the rules depend only on the text:
        the allow list, patterns and env values are fixed at construction; a callback runs after)."""
        local: Hits = {}
        out = self._text(value, local, "")
        counts = tuple((rule, n) for (_, rule), n in local.items())
        for rule, n in counts:
            count_hit(hits, path, rule, n)
        if len(value) >= _MEMO_MIN:
            self._memo_chars += len(value) + len(out)
            if self._memo_chars > _MEMO_CHARS:  # start again rather than track an order
                self._memo, self._memo_chars = {}, len(value) + len(out)
            self._memo[value] = (out, counts)
        return out

    def _text(self, value: str, hits: Hits | None, path: str) -> str:
        folded = fold(value)
        present = self._present(folded)
        for rule in RULES:
            if present.intersection(rule.tells):
                value = self._apply(rule, value, hits, path)
        for rule in self._own:
            value = self._apply(rule, value, hits, path)
        # Known token shapes before env values: an env value inside a token must not split it and
        # leave its ends behind.
        for name, secret in self._env_values:
            if secret in value:
                count_hit(hits, path, f"env:{name}", value.count(secret))
                value = value.replace(secret, placeholder(f"env:{name}"))
        if present.intersection(KEY_TELLS):
            value = self._key_values(value, hits, path)
        return value

    def _key_values(self, value: str, hits: Hits | None, path: str) -> str:
        """``name=value`` pairs with a secret's name.

        Every secret name holds a key word (``KEY_TELLS``), so only the names around the places
        those words occur are tried, anchored: scanning every name in a 10 MB tool result took
        seconds. A pair whose name is not a secret's consumes nothing, so the value of ``https:``
        in ``https://h/?api_key=X`` or of ``note:`` in ``note: password=X`` is looked at too.
        """
        pattern, out, last = key_value_in_text(), [], 0
        for at in _tell_positions(value):
            if at < last:
                continue
            begin = at
            while begin > max(last, at - 81) and (value[begin - 1].isalnum() or value[begin - 1] in "_.-"):
                begin -= 1
            for start in range(begin, at + 1):
                m = pattern.match(value, start)
                if m is None or m.end("key") <= at:
                    continue
                secret = m.group("quoted") if m.group("q") else m.group("bare")
                if secret and is_secret_under(m.group("key"), secret) and not secret.startswith("[REDACTED:") \
                        and secret not in self._allow \
                        and (m.group("q") or not looks_like_code(m.group("key"), secret)):
                    s, e = m.span("quoted" if m.group("q") else "bare")
                    out += [value[last:s], placeholder("secret_key")]
                    last = e
                    count_hit(hits, path, "secret_key")
                break
        return "".join(out) + value[last:] if out else value

    def _apply(self, rule: Rule, value: str, hits: Hits | None, path: str) -> str:
        out: list[str] = []
        last = 0
        for m in rule.regex.finditer(value):
            start, end = m.span(rule.group)
            if start < last or start == end:
                continue
            if rule.extend:
                while end < len(value) and value[end] in TOKEN_CHARS:
                    end += 1
            secret = value[start:end]
            if secret in self._allow or secret.startswith("[REDACTED:") or (rule.check and not rule.check(secret)):
                continue
            out += [value[last:start], placeholder(rule.name)]
            last = end
            count_hit(hits, path, rule.name)
        return "".join(out) + value[last:] if out else value

    def _may_hold(self, text: str, folded: str | None = None, env_values: Iterable[str] | None = None,
                  own: bool = True) -> bool:
        """False only if no rule, secret key name or env secret can match in ``text``.

        Regular expressions that do not start with a literal scan at a few MB/s, so a 10 MB tool
        result would hold the exporter for seconds; the screen reads the case-folded text once for
        every tell (``screen.py``), and only text that fails it is searched properly.
        """
        folded = fold(text) if folded is None else folded
        if env_values is None:
            env_values = (v for _, v in self._env_values)
        if len(folded) < _SHORT:
            told = self._tell_re.search(folded) is not None
        else:
            told = self._screen.any(folded)
        return told or any(v in text for v in env_values) or \
            (own and any(r.regex.search(text) for r in self._own))

    def _present(self, folded: str) -> set[str]:
        """The tells in ``folded``, found in one pass."""
        return self._screen.present(folded)

    def may_redact(self, attribute_maps: Sequence[Mapping[str, Any]], texts: Iterable[str | None] = ()) -> bool:
        """False only if redacting every map (as ``attributes`` does) and every text would change
        nothing: one cheap test for a whole batch, which rarely holds a secret."""
        if not self.enabled:
            return False
        if self.callback is not None:
            return True  # the callback may change any text
        keys = set().union(*attribute_maps)
        if any(is_secret_key(k) for k in keys.difference(SAFE_KEYS)):
            return True
        try:
            # Every value at once, as one JSON text: encoding in C is far cheaper than visiting the
            # values in Python. Escaping leaves the tells alone (letters, digits, "-", "_", ":",
            # "/", space); env values are looked for as escaped. Keys inside JSON text are in it;
            # the maps' own keys are added (``attributes`` redacts a key as text too).
            values = list(chain.from_iterable(m.values() for m in attribute_maps))
            values.extend(t for t in texts if t)
            values.extend(keys)
            blob = orjson.dumps(values).decode()
        except TypeError:
            return True  # a value orjson refuses (a lone surrogate, an object): look at each one
        if self._own and self._own_may_match(values):
            return True
        return self._may_hold(blob, fold(blob), self._env_escaped, own=False)

    def _own_may_match(self, values: Iterable[Any]) -> bool:
        """The user's patterns tried on each text as it is, not on the batch's JSON text: there an
        anchored pattern (``^TK[0-9]+$``) or one that matches a newline or a quote never matched,
        the batch was cleared, and the values went to the store unredacted."""
        for value in values:
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, str):
                    if any(rule.regex.search(item) for rule in self._own):
                        return True
                elif not (item is None or isinstance(item, (bool, int, float))):
                    return True  # something else: looked at value by value
        return False

    def leaves_alone(self, value: Any) -> bool:
        """True only if ``value(value)`` would give back a value equal to ``value`` (False when unsure).

        One screen over the value's JSON, as ``may_redact`` does for a batch, instead of a walk that
        tests every key and text in Python: the instrumentor redacts each new message of a
        conversation on the agent's thread (its request hash is of the redacted request), and
        nearly all of them hold nothing. Unsure, so False: a callback (it may change any text), a
        pattern of the user's (it may not match JSON-escaped text as it matches the raw text), a
        value orjson refuses (bytes, objects, non-text keys: ``value`` converts those), and nesting
        that could reach ``_MAX_DEPTH`` (every ``{`` and ``[`` in the text counted as a level).
        """
        if not self.enabled:
            return True
        if self.callback is not None or self._own:
            return False
        try:
            blob = orjson.dumps(value).decode()
        except TypeError:
            return False
        if blob.count("{") + blob.count("[") >= _MAX_DEPTH:
            return False
        return not self._may_hold(blob, fold(blob), self._env_escaped)

    def value_or_same(self, value: Any) -> Any:
        """``value`` itself when ``leaves_alone`` says nothing in it changes, else ``value(value)``:
        for a caller that only reads the result (the instrumentor's request log hashes it)."""
        return value if self.leaves_alone(value) else self.value(value)

    # -- structures ----------------------------------------------------------------------------

    def value(self, value: Any, hits: Hits | None = None, key: str | None = None, path: str = "") -> Any:
        """A copy of ``value`` with secrets redacted, of the same type; JSON text is redacted as
        JSON (keys included) and re-encoded only if something in it was redacted."""
        if not self.enabled:
            return value
        try:
            return self._value(value, hits, key, path, 0)
        except Exception:  # noqa: BLE001 - never raw
            self._warn("redacting a structured value raised")
            count_hit(hits, path, "redaction_failed")
            return json.dumps(FAILED) if isinstance(value, str) and looks_json(value) else FAILED

    def _value(self, value: Any, hits: Hits | None, key: str | None, path: str, depth: int) -> Any:
        if key is not None and is_secret_key(key) and (not isinstance(value, str) or is_secret_under(key, value)):
            return self._secret(value, hits, path)
        if isinstance(value, str):
            return self._string(value, hits, path, depth)
        if isinstance(value, (Mapping, list, tuple)) and depth >= _MAX_DEPTH:
            return self._cut(value, hits, path)
        if isinstance(value, Mapping):
            out = {}
            for k, v in value.items():
                name = self.text(k, hits, path) if isinstance(k, str) else k
                out[name] = self._value(v, hits, str(name), _join(path, str(name)), depth + 1)
            return out
        if isinstance(value, (list, tuple)):
            items = [self._value(v, hits, None, f"{path}[{i}]", depth + 1) for i, v in enumerate(value)]
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, (bytes, bytearray)):
            return self.text(bytes(value).decode("utf-8", "replace"), hits, path)
        return value

    def _string(self, value: str, hits: Hits | None, path: str, depth: int) -> str:
        if not looks_json(value):
            return self.text(value, hits, path)
        if not self._own and not self._may_hold(value):  # a user's pattern may match only a value in it
            return self._callback(value, hits, path)
        try:
            parsed = json.loads(value)
        except RecursionError:
            return json.dumps(self._cut(value, hits, path))
        except ValueError:
            return self.text(value, hits, path)  # not JSON after all: text (placeholders hold no quote)
        local: Hits = {}
        try:
            redacted = self._value(parsed, local, None, path, depth + 1)
        except RecursionError:
            return json.dumps(self._cut(value, hits, path))
        if not local:
            return value  # nothing in it: the original bytes, not a re-encoding
        for where, n in local.items():
            count_hit(hits, where[0], where[1], n)
        return json.dumps(redacted, ensure_ascii=False)

    def _secret(self, value: Any, hits: Hits | None, path: str) -> Any:
        """A value under a secret key: every text in it goes; numbers and booleans stay, so the
        value keeps its type."""
        if isinstance(value, str):
            if not value or value.startswith("[REDACTED:") or value in self._allow:
                return value
            count_hit(hits, path, "secret_key")
            return placeholder("secret_key")
        if isinstance(value, Mapping):
            return {k: self._secret(v, hits, _join(path, str(k))) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            items = [self._secret(v, hits, f"{path}[{i}]") for i, v in enumerate(value)]
            return tuple(items) if isinstance(value, tuple) else items
        return value

    def _cut(self, value: Any, hits: Hits | None, path: str) -> Any:
        """Nesting too deep to walk: kept whole if no rule can match in it, else cut to a marker."""
        try:
            text = value if isinstance(value, str) else orjson.dumps(value).decode()
        except (TypeError, orjson.JSONEncodeError):
            text = None
        if text is not None and not self._may_hold(text):
            if not (self._own and self._own_may_match(leaf_texts(value))):
                return value
        count_hit(hits, path, "too_deep")
        return TOO_DEEP

    def attributes(self, attrs: Mapping[str, Any], hits: Hits, path: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in attrs.items():
            name = self.text(k, hits, path)
            out[name] = v if k in SAFE_KEYS or not isinstance(v, (str, list, tuple, dict)) else \
                self.value(v, hits, name, _join(path, name))
        return out

    # -- failure -------------------------------------------------------------------------------

    def _callback(self, value: str, hits: Hits | None, path: str) -> str:
        if self.callback is not None:
            try:
                value = self.callback(value)
            except Exception as exc:  # noqa: BLE001 - fail closed, keep the agent running
                count_hit(hits, path, "callback_failed")
                self._warn(f"the redaction callback raised {exc}")
                return placeholder("callback_failed")
        return value

    def _warn(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("looptrace: %s; such values are replaced whole", what, exc_info=True)


def _tell_positions(text: str) -> list[int]:
    """Where a key word starts in ``text``, case-insensitively. ASCII text (nearly all of it) is
    searched by ``str.find`` in C; a case-insensitive regex alternation scans at ~3 MB/s."""
    if not text.isascii():
        return [m.start() for m in _KEY_TELL.finditer(text)]
    lower, found = text.lower(), []
    for tell in KEY_TELLS:
        at = lower.find(tell)
        while at >= 0:
            found.append(at)
            at = lower.find(tell, at + 1)
    return sorted(found)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
