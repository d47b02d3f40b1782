"""``looptrace serve``: a recorded run served over HTTP as the Anthropic Messages API.

An agent in any language, pointed at it with ``ANTHROPIC_BASE_URL``, gets the recorded responses in
order. A request that drifts from the recording gets an error response naming the step and the
difference; with ``lenient``, the next recorded response and a logged warning.
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

__all__ = ["RecordingHandler", "TRANSPORT_KEYS"]

log = logging.getLogger("looptrace.serve")

# Request keys that change how an answer is delivered, not what was asked.
TRANSPORT_KEYS = frozenset({"stream"})


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

    def __call__(self, body: dict[str, Any]) -> ScriptItem:
        request = {k: v for k, v in body.items() if k not in TRANSPORT_KEYS}
        with self._lock:
            k = self.served
            if k >= len(self.recording.calls):
                return Fault(400, "invalid_request_error",
                             f"looptrace replay: the recording has only {len(self.recording.calls)} model calls")
            recorded = self.recording.calls[k]
            if self._requests.identity(request) != recorded.request_sha:
                what = describe_drift(recorded.request, self.redactor.value(request), max_lines=20)
                message = f"looptrace replay: request {k + 1} (step {recorded.step}) drifted from the recording: {what}"
                if not self.lenient:
                    self.drifts.append(message)
                    return Fault(400, "invalid_request_error", message)
                log.warning("%s (lenient: serving the recorded response)", message)
            self.served += 1
        if recorded.response is None:
            return Fault(400, "invalid_request_error", recorded.error or "the recorded call failed")
        r = recorded.response
        return Reply(list(r.get("content") or []), r.get("stop_reason") or "end_turn", r.get("usage"), r.get("model"))
