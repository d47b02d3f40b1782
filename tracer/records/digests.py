"""Hashing a growing conversation in time proportional to what is new, not to its length.

An agent resends its whole history on every call, so hashing every message (and the whole request)
on every call costs the square of the run's length, on the agent's thread. ``ConversationDigest``
remembers, per run, a plain copy of each message already hashed, its hash, and the SHA-256 state of
the request's canonical JSON up to that message. A new request is compared with the copies
(``==`` on plain data, done in C and short-circuited by shared leaves), and only the messages after
the first difference are serialised and hashed; the request hash continues from the saved state.

The hashes are exactly ``content_sha`` of the same values (tests prove it), so stores written before
and after stay comparable, and replay's check of a rebuilt request against ``request_sha`` holds.
Requests of an unusual shape (no message list, non-text keys) fall back to hashing whole.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .text import canonical_json, plain

__all__ = ["content_sha", "ConversationDigest", "RequestDigest"]

_MESSAGES = "messages"
_SURROGATE = re.compile("[\ud800-\udfff]")


def content_sha(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()[:32]


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def _canonical_plain(value: Any) -> str:
    """``canonical_json`` of a value that already went through ``plain``."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class _Remembered:
    """A value seen before: its plain copy and canonical JSON, reused while the new value equals it."""

    __slots__ = ("copy", "text", "sha")

    def __init__(self, value: Any) -> None:
        self.copy, self.text = _copy_and_text(value)
        self.sha = _text_sha(self.text)


def _copy_and_text(value: Any) -> tuple[Any, str]:
    """(a plain copy, the canonical JSON) of ``value``, as ``plain`` and ``canonical_json`` make them.

    Plain JSON data (what agents send) takes the C encoder and decoder: its text is what
    ``canonical_json`` writes exactly when reading it back gives an equal value with no lone
    surrogates (bytes, NaN, sets, SDK objects raise; a non-text key reads back as text and differs).
    Anything else takes the recursive ``plain`` copy.
    """
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
        if not _SURROGATE.search(text):
            copy = json.loads(text)
            if copy == value:
                return copy, text
    except (TypeError, ValueError, RecursionError):
        pass
    copy = plain(value)
    return copy, _canonical_plain(copy)


def _same(seen: _Remembered | None, value: Any) -> bool:
    # The type test keeps a tuple or an SDK model (whose plain copy is a list or dict) from ever
    # matching, so those are hashed again each time: correct, only slower. Known limit: ``==`` holds
    # for 1 == 1.0 == True, so a nested number rewritten in place as another of these is not seen.
    try:
        return seen is not None and type(seen.copy) is type(value) and seen.copy == value
    except Exception:  # noqa: BLE001 - a value whose comparison raises is simply hashed again
        return False


class RequestDigest:
    """What ``ConversationDigest.digest`` returns for one request."""

    __slots__ = ("message_shas", "system_sha", "tools_sha", "request_sha", "kept")

    def __init__(self, message_shas: list[str], system_sha: str | None, tools_sha: str | None,
                 request_sha: str, kept: int) -> None:
        self.message_shas = message_shas
        self.system_sha = system_sha
        self.tools_sha = tools_sha
        self.request_sha = request_sha
        self.kept = kept  # messages whose hash was reused from the previous request


class ConversationDigest:
    """Per-run memory of the last request's messages and hash states. Not thread-safe: callers lock."""

    def __init__(self) -> None:
        self._messages: list[_Remembered] = []
        self._copies: list[Any] = []  # the messages' plain copies, for the one-comparison prefix test
        self._ids: list[int] = []  # id() of each message as last given: a hint, confirmed by ``==``
        self._states: list[Any] = []  # _states[i]: SHA-256 of the request's JSON through message i - 1
        self._head: str | None = None  # the request's JSON before its first message
        self._fields: dict[str, _Remembered] = {}  # the other fields, e.g. system and tools, by key
        self._kept = 0

    def prefix_len(self, messages: Sequence[Any]) -> int:
        """How many leading ``messages`` equal those of the last request (no state changes)."""
        n = len(self._messages)
        # The usual case, the whole last request resent and extended: one comparison, in C.
        if n <= len(messages) and isinstance(messages, list) and self._copies == messages[:n]:
            return n
        n = 0
        for seen, message in zip(self._messages, messages):
            if not _same(seen, message):
                break
            n += 1
        return n

    def message_shas(self, messages: Sequence[Any]) -> list[str]:
        """``content_sha`` of each message, reusing the hashes of the last request's equal prefix."""
        return self._remember(messages)[0]

    def extension_shas(self, messages: Sequence[Any], n: int) -> list[str] | None:
        """``message_shas(messages)`` when ``messages`` begin with all ``n`` messages of the last request
        and add more; else None, remembering nothing. One comparison for the test and the hashing."""
        keep = self.prefix_len(messages)
        if keep != n or n != len(self._messages) or n >= len(messages):
            return None
        return self._remember(messages, keep=keep)[0]

    def last_keep(self) -> int:
        """How many leading messages the last ``message_shas``/``digest`` kept from the request before."""
        return self._kept

    def remembered(self) -> list[Any]:
        """What this digest remembers of each message of the last request, in order: after
        ``message_shas(messages)`` each entry describes a value equal to that message, so another
        digest given the same message object may take it (``digest``'s ``known``) instead of
        serialising and hashing it again."""
        return list(self._messages)

    def _remember(self, messages: Sequence[Any], known: Sequence[Any] = (),
                  keep: int | None = None) -> tuple[list[str], int]:
        # ``keep``: a prefix length the caller has just established against this digest's last request
        # (or a lower bound of it), so the remembered messages are not compared with the new ones again.
        keep = self.prefix_len(messages) if keep is None else min(keep, len(self._messages), len(messages))
        by_id: dict[int, _Remembered] = {}
        if keep < len(self._messages):
            # An agent that keeps a window of its history drops messages from the front, so no
            # prefix is kept, but the messages themselves are the same objects as last time, at
            # other places: each is found by id and confirmed equal to its copy, not serialised again.
            by_id = dict(zip(self._ids[keep:], self._messages[keep:]))
            del self._messages[keep:]
            del self._copies[keep:]
            del self._ids[keep:]
            del self._states[keep + 1:]
        new = []
        for i, m in enumerate(messages[keep:], keep):
            seen = by_id.get(id(m))
            if seen is None or not _same(seen, m):
                seen = known[i] if i < len(known) and known[i] is not None else _Remembered(m)
            new.append(seen)
        self._messages.extend(new)
        self._copies.extend(m.copy for m in new)
        self._ids.extend(id(m) for m in messages[keep:])
        self._kept = keep
        return [m.sha for m in self._messages], keep

    def digest(self, request: Mapping[str, Any], known: Sequence[Any] = (), keep: int | None = None) -> RequestDigest:
        """The hashes of ``request``'s messages, system prompt and tools, and of the whole request,
        each equal to ``content_sha`` of the same value. ``known[i]``, when not None, is another
        digest's ``remembered()`` entry for a value equal to message ``i``; ``keep``, when given, a
        number of leading messages known equal to the last request's (see ``_remember``)."""
        messages = request.get(_MESSAGES)
        if not isinstance(messages, (list, tuple)) or not all(isinstance(k, str) and k.isascii() for k in request):
            return self._whole(request)
        shas, keep = self._remember(messages, known, keep)
        before, after = [], []
        for key in sorted(request):
            if key == _MESSAGES:
                continue
            field = self._field(key, request[key])
            (before if key < _MESSAGES else after).append(f"{json.dumps(key, ensure_ascii=False)}:{field.text}")
        head = "{" + "".join(p + "," for p in before) + '"messages":['
        if head != self._head:  # e.g. another max_tokens: the saved states hashed the old head
            self._head, self._states = head, [hashlib.sha256(head.encode("utf-8"))]
        for i in range(len(self._states) - 1, len(self._messages)):
            state = self._states[i].copy()
            state.update(("," if i else "").encode("utf-8") + self._messages[i].text.encode("utf-8"))
            self._states.append(state)
        whole = self._states[len(self._messages)].copy()
        whole.update(("]" + "".join("," + p for p in after) + "}").encode("utf-8"))
        return RequestDigest(
            shas, self._sha_of("system", request), self._sha_of("tools", request), whole.hexdigest()[:32], keep,
        )

    def _field(self, key: str, value: Any) -> _Remembered:
        seen = self._fields.get(key)
        if not _same(seen, value):
            seen = self._fields[key] = _Remembered(value)
        return seen  # type: ignore[return-value]

    def _sha_of(self, key: str, request: Mapping[str, Any]) -> str | None:
        return self._fields[key].sha if request.get(key) is not None else None

    def _whole(self, request: Mapping[str, Any]) -> RequestDigest:
        messages = list(request.get(_MESSAGES) or [])
        return RequestDigest(
            [content_sha(m) for m in messages],
            content_sha(request["system"]) if request.get("system") is not None else None,
            content_sha(request["tools"]) if request.get("tools") is not None else None,
            content_sha(dict(request)), 0,
        )
