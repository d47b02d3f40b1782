"""Recording model requests so storage grows linearly with a run's length.

An agent resends its whole history on every call, so storing each request whole would make a
200-step run hold 200 copies of it. Instead each call stores only what is new against the previous
call of the same run: how many of the previous request's messages it skips at the front (``drop``:
an agent that sends a window of its history lets the oldest go) and keeps after them (``keep``), the
messages it appends, and the system prompt and tool list only the first time their content is seen
(by hash). ``rebuild_requests`` turns those rows back into whole requests for replay; the
``request_sha`` of the whole request lets replay verify the reconstruction.

Identity is computed on the *redacted* request (``redact``, the sink's redactor): what is stored is
redacted, so a replay rebuilds the redacted request, and a live request redacted the same way must
hash the same. It also keeps a stored hash from fingerprinting a secret. What is recorded (the
deltas) stays raw here: the sink redacts it and writes where it did into the manifest.

Hashing is incremental (``digests.py``): a call costs what its request adds, not its length. The raw
messages' hashes (which say how much of the last request a call keeps) and the redacted request's
hashes (its identity) each have their own ``ConversationDigest``; a message is redacted once per run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import is_
from threading import Lock
from typing import Any

from .digests import ConversationDigest, content_sha

__all__ = ["content_sha", "request_identity", "EncodedRequest", "RequestLog", "overlap", "rebuild_requests",
           "split_request"]

Redact = Callable[[Any], Any]


def request_identity(request: Mapping[str, Any], redact: Redact | None = None) -> str:
    """The ``request_sha`` of a whole request, after ``redact`` (what replay compares)."""
    return content_sha(redact(dict(request)) if redact is not None else dict(request))


def split_request(request: Mapping[str, Any]) -> tuple[Any, Any, list[Any], dict[str, Any]]:
    """(system, tools, messages, other parameters) of a Messages API request."""
    params = {k: v for k, v in request.items() if k not in ("system", "tools", "messages")}
    return request.get("system"), request.get("tools"), list(request.get("messages") or []), params


@dataclass(frozen=True)
class EncodedRequest:
    params: dict[str, Any]
    system_sha: str | None
    system: Any  # None when an earlier call of the run already stored this content
    tools_sha: str | None
    tools: Any
    base_call_id: str | None
    keep: int
    append: list[Any]
    request_sha: str
    drop: int = 0  # leading messages of the base request this one no longer sends


class RequestLog:
    """Per-run memory of what is already recorded. Thread-safe. ``redact`` maps a value to its
    redacted copy; hashes that are stored are computed on what it returns."""

    def __init__(self, redact: Redact | None = None) -> None:
        self._redact = redact
        self._seen: set[str] = set()
        self._last_call: str | None = None
        self._last_hashes: list[str] = []
        self._raw = ConversationDigest()
        self._identity = ConversationDigest()
        self._redacted: dict[str, Any] = {}  # raw message hash -> redacted message, last request's
        self._params: tuple[dict[str, Any], dict[str, Any]] | None = None  # (last raw, redacted) of the rest
        # The identity digest's last request is the raw digest's: then the raw digest's prefix test
        # answers for both (the same raw message has the same redacted object), one comparison a call.
        self._synced = True
        # What the last ``message_shas`` handed out, for the ``encode`` of the same request that follows
        # (the instrumentor hashes a request to find its run first): (messages, hashes, identity keep).
        self._given: tuple[list[Any], list[str], int | None] | None = None
        self._lock = Lock()

    def prefix_len(self, messages: list[Any]) -> int:
        """How many leading ``messages`` equal those of the last request encoded or hashed."""
        with self._lock:
            return self._raw.prefix_len(messages)

    def message_shas(self, messages: list[Any]) -> list[str]:
        """The raw messages' hashes, from the same digest ``encode`` uses: a caller that needs them
        first (the instrumentor, to find a call's run) leaves ``encode`` nothing to hash again."""
        with self._lock:
            hashes = self._raw.message_shas(messages)
            self._hand(messages, hashes)
            return hashes

    def extension_shas(self, messages: list[Any], n: int) -> list[str] | None:
        """``message_shas(messages)`` when ``messages`` extend all ``n`` messages of the last request;
        else None, and nothing is remembered (the instrumentor's test of which run a request continues)."""
        with self._lock:
            hashes = self._raw.extension_shas(messages, n)
            if hashes is not None:
                self._hand(messages, hashes)
            return hashes

    def _hand(self, messages: list[Any], hashes: list[str]) -> None:
        self._given = (list(messages), hashes, self._raw.last_keep() if self._synced else None)
        self._synced = False

    def _raw_shas(self, messages: list[Any]) -> tuple[list[str], int | None, bool]:
        """(the raw hashes, how many leading messages the identity digest may keep without comparing
        (None: compare), whether the raw digest was already at ``messages``). The hashes just handed
        out are taken once, for the very same message objects (nothing can change them in between:
        the request has not been sent); anything else is compared and hashed as usual."""
        given, self._given = self._given, None
        if given is not None and len(given[0]) == len(messages) and all(map(is_, given[0], messages)):
            return given[1], given[2], True
        synced = self._synced
        hashes = self._raw.message_shas(messages)
        return hashes, self._raw.last_keep() if synced else None, False

    def identity(self, request: Mapping[str, Any]) -> str:
        """The ``request_sha`` that ``encode`` gives ``request``, recording nothing: what a replay
        compares with the recorded one, at the cost of what the request adds to the last one (each
        message redacted and hashed once per run, not the whole history on every call)."""
        messages = list(request.get("messages") or [])
        with self._lock:
            self._given = None
            if self._redact is None:
                return self._raw.digest(request).request_sha
            hashes, keep, _ = self._raw_shas(messages)
            redacted = self._redacted_request(request, messages, hashes)
            digest = self._identity.digest(redacted, self._unchanged(messages, redacted), keep)
            self._synced = True
            return digest.request_sha

    def encode(self, request: Mapping[str, Any], call_id: str) -> EncodedRequest:
        system, tools, messages, params = split_request(request)
        with self._lock:
            if self._redact is None:
                _, _, current = self._raw_shas(messages) if self._given is not None else ((), None, False)
                digest = self._raw.digest(request, keep=len(messages) if current else None)
                hashes = digest.message_shas
            else:
                hashes, keep, _ = self._raw_shas(messages)
                redacted = self._redacted_request(request, messages, hashes)
                digest = self._identity.digest(redacted, self._unchanged(messages, redacted), keep)
                self._synced = True
            drop, keep = overlap(self._last_hashes, hashes)
            base = self._last_call if keep else None
            system_sha, tools_sha = digest.system_sha, digest.tools_sha
            new_system = system if system_sha and system_sha not in self._seen else None
            new_tools = tools if tools_sha and tools_sha not in self._seen else None
            self._seen.update(s for s in (system_sha, tools_sha) if s)
            self._last_call, self._last_hashes = call_id, hashes
        return EncodedRequest(
            params=params,
            system_sha=system_sha,
            system=new_system,
            tools_sha=tools_sha,
            tools=new_tools,
            base_call_id=base,
            keep=keep,
            append=messages[keep:],
            request_sha=digest.request_sha,
            drop=drop,
        )

    def _unchanged(self, messages: list[Any], redacted: Mapping[str, Any]) -> list[Any]:
        """The raw digest's entry for each message that redaction gave back as the same object
        (``Redactor.value_or_same``: most of them), so the identity digest does not serialise and
        hash it a second time; None for the others."""
        remembered = self._raw.remembered()
        return [r if m is given else None
                for r, m, given in zip(remembered, redacted.get("messages") or (), messages)]

    def _redacted_request(self, request: Mapping[str, Any], messages: list[Any], hashes: list[str]) -> dict[str, Any]:
        """``request`` redacted, message by message, each message redacted once per run (the history is
        resent on every call); equal to redacting the whole request, since redaction depends only on a
        value and its key. The same redacted objects come back each call, so the identity digest's
        prefix test is one comparison."""
        assert self._redact is not None
        cache = {h: self._redacted[h] if h in self._redacted else self._redact({"messages": m})["messages"]
                 for h, m in zip(hashes, messages)}
        self._redacted = cache
        params = {k: v for k, v in request.items() if k != "messages"}
        if self._params is None or self._params[0] != params:
            # The model, system prompt, tools and limits rarely change within a run: redacted once
            # while they stay equal. (As in ``digests._same``, ``==`` holds for 1 == 1.0 == True.)
            self._params = (params, self._redact(params))
        redacted = dict(self._params[1])
        if "messages" in request:
            redacted["messages"] = [cache[h] for h in hashes]
        return redacted


def overlap(last: list[str], new: list[str]) -> tuple[int, int]:
    """(drop, keep) such that ``new`` starts with ``last[drop:drop + keep]``, ``keep`` as large as it
    can be (the fewest messages stored again), then ``drop`` as small. An agent that resends its
    whole history gets (0, all of the last); one that sends a window of it, (how many fell out of
    the window, the rest): without ``drop`` such an agent stored its whole window on every call."""
    keep = _common(last, new, 0)
    best = (0, keep)
    if not new or keep >= len(last) - 1:
        return best  # nothing later in ``last`` can share more
    at = 0
    while True:
        try:
            at = last.index(new[0], at + 1)
        except ValueError:
            return best
        if len(last) - at <= best[1]:
            return best
        keep = _common(last, new, at)
        if keep > best[1]:
            best = (at, keep)


def _common(last: list[str], new: list[str], start: int) -> int:
    n = 0
    for a, b in zip(last[start:] if start else last, new):
        if a != b:
            break
        n += 1
    return n


def rebuild_requests(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Whole requests by call id, from rows holding the fields of ``EncodedRequest`` (in call order).

    Raises ``KeyError`` naming what is missing when a row refers to a call or content not given.
    """
    contents: dict[str, Any] = {}
    messages_of: dict[str, list[Any]] = {}
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        call_id = row["call_id"]
        for sha_key, key in (("system_sha", "system"), ("tools_sha", "tools")):
            if row.get(key) is not None and row.get(sha_key):
                contents[row[sha_key]] = row[key]
        base = row.get("base_call_id")
        keep, drop = int(row.get("keep") or 0), int(row.get("drop") or 0)
        if keep:
            if base not in messages_of:
                raise KeyError(f"call {call_id} extends call {base}, which is not recorded")
            prefix = messages_of[base][drop:drop + keep]
        else:
            prefix = []
        messages = prefix + list(row.get("append") or [])
        messages_of[call_id] = messages
        request: dict[str, Any] = dict(row.get("params") or {})
        for sha_key, key in (("system_sha", "system"), ("tools_sha", "tools")):
            sha = row.get(sha_key)
            if sha:
                if sha not in contents:
                    raise KeyError(f"call {call_id}: its {key} (sha {sha}) is not recorded")
                request[key] = contents[sha]
        if messages or "input" not in request:  # a Responses request carries its conversation as ``input``
            request["messages"] = messages
        out[call_id] = request
    return out
