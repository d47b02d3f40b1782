"""``looptrace serve``: a recorded run served over HTTP as the API it was recorded from.

A run recorded from the Anthropic Messages API is served as that API; one recorded from the OpenAI
client (Chat Completions or Responses, ``spans/openai.py``) as the OpenAI API, its responses verbatim.
An agent in any language, pointed at it (``ANTHROPIC_BASE_URL`` / ``OPENAI_BASE_URL``), gets the
recorded responses in order. A request that drifts from the recording gets an error response naming
the step and the difference; with ``lenient``, the next recorded response and a logged warning.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from looptrace.loop.replies import Fault, Reply, ScriptItem
from looptrace.tracer.records.requests import RequestLog
from looptrace.tracer.sink.redact import Redactor

from .drift import describe_drift
from .recording import Recording

__all__ = ["RecordingHandler", "OpenAIRecordingHandler", "TRANSPORT_KEYS", "is_openai"]

log = logging.getLogger("looptrace.serve")

# Request keys that change how an answer is delivered, not what was asked.
TRANSPORT_KEYS = frozenset({"stream", "stream_options"})


def is_openai(recording: Recording) -> bool:
    """Whether the run's responses are OpenAI's (Chat Completions or Responses bodies)."""
    first = next((c.response for c in recording.calls if c.response), None) or {}
    return "choices" in first or first.get("object") == "response"


class RecordingHandler:
    """A ``MessagesServer`` handler serving ``recording``'s responses in order."""

    def __init__(self, recording: Recording, *, lenient: bool = False, redactor: Redactor | None = None) -> None:
        self.recording = recording
        # Recorded requests are redacted and hashed so (records/requests.py): compare likewise.
        self.redactor = redactor if redactor is not None else Redactor()
        self._requests = RequestLog(self.redactor.value)
        self.lenient = lenient
        self.served = 0
        self.drifts: list[str] = []
        self._lock = threading.Lock()

    def next_response(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """(the recorded response, None) for the next request, or (None, why not)."""
        with self._lock:
            k = self.served
            if k >= len(self.recording.calls):
                return None, f"looptrace replay: the recording has only {len(self.recording.calls)} model calls"
            recorded = self.recording.calls[k]
            # Recorded as the agent passed it: with ``stream`` for ``create(stream=True)``, without it for
            # the SDK's ``stream()`` helper, which adds it to the body. Either way the same question.
            request = {k: v for k, v in body.items() if k not in TRANSPORT_KEYS or k in recorded.request}
            if self._requests.identity(request) != recorded.request_sha:
                what = describe_drift(recorded.request, self.redactor.value(request), max_lines=20)
                message = f"looptrace replay: request {k + 1} (step {recorded.step}) drifted from the recording: {what}"
                if not self.lenient:
                    self.drifts.append(message)
                    return None, message
                log.warning("%s (lenient: serving the recorded response)", message)
            self.served += 1
        if recorded.response is None:
            return None, recorded.error or "the recorded call failed"
        return recorded.response, None

    def __call__(self, body: dict[str, Any]) -> ScriptItem:
        r, error = self.next_response(body)
        if r is None:
            return Fault(400, "invalid_request_error", error or "no response")
        return Reply(list(r.get("content") or []), r.get("stop_reason") or "end_turn", r.get("usage"), r.get("model"))


class OpenAIRecordingHandler(RecordingHandler):
    """A ``ChatCompletionsServer`` handler: the recorded Chat Completions or Responses bodies, verbatim."""

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        r, error = self.next_response(body)
        if r is None:
            return {"status": 400, "error": {"message": error, "type": "invalid_request_error"}}
        return r
