"""A client's streamed answer passed through unchanged while its final response is built.

The SDKs' streams yield events; an instrumentor must record the response they add up to without
changing what the agent reads. ``RecordingStream`` (and its async twin) forwards every event and
feeds it to an ``Accumulator``, a client's subclass that folds events into the final response (the
Anthropic one uses the SDK's own accumulator); ``finish`` reports that response, or the error that
ended the stream, exactly once (client.py ends the call's span with it).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

__all__ = ["Accumulator", "Done", "RecordingAsyncStream", "RecordingStream"]

log = logging.getLogger("looptrace.instrumentor")

Done = Callable[[Any, BaseException | None], None]  # called once with (final response | None, error | None)


class Accumulator:
    """Builds a stream's final response from its events; ``finish`` reports it (or the error) once."""

    def __init__(self, done: Done) -> None:
        self._done = done
        self.snapshot: Any = None
        self._finished = False

    def add(self, event: Any) -> None:
        """Fold one event into ``snapshot`` (a client's subclass)."""
        raise NotImplementedError

    def feed(self, event: Any) -> None:
        try:
            self.add(event)
        except Exception:  # noqa: BLE001
            log.debug("looptrace: could not accumulate a stream event", exc_info=True)

    def finish(self, error: BaseException | None = None) -> None:
        if not self._finished:
            self._finished = True
            if error is None and self.snapshot is None:
                error = RuntimeError("stream closed before any event")
            self._done(self.snapshot if error is None else None, error)


class RecordingStream:
    """Passes a stream through unchanged while accumulating the final response."""

    def __init__(self, stream: Any, acc: Accumulator) -> None:
        self._stream = stream
        self._acc = acc

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._stream:
                self._acc.feed(event)
                yield event
        except BaseException as exc:
            self._acc.finish(exc)
            raise
        self._acc.finish()

    def __next__(self) -> Any:  # the SDKs' streams are iterators too
        try:
            event = next(self._stream)
        except StopIteration:
            self._acc.finish()
            raise
        except BaseException as exc:
            self._acc.finish(exc)
            raise
        self._acc.feed(event)
        return event

    def __enter__(self) -> RecordingStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stream.close()
        self._acc.finish(None if self._acc.snapshot is not None else RuntimeError("stream closed early"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class RecordingAsyncStream:
    def __init__(self, stream: Any, acc: Accumulator) -> None:
        self._stream = stream
        self._acc = acc

    async def __aiter__(self) -> AsyncIterator[Any]:
        try:
            async for event in self._stream:
                self._acc.feed(event)
                yield event
        except BaseException as exc:
            self._acc.finish(exc)
            raise
        self._acc.finish()

    async def __aenter__(self) -> RecordingAsyncStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._stream.close()
        self._acc.finish(None if self._acc.snapshot is not None else RuntimeError("stream closed early"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
