"""OTLP in: decode OTLP/HTTP requests, map the GenAI, OpenInference and OpenLLMetry conventions to
records, and the HTTP receiver behind ``looptrace collect`` that buffers traces until complete."""

from __future__ import annotations

from .conventions import classify, rows_for_trace, run_id_for
from .conversations import group_conversations, is_loose_call
from .protocol import IngestError, MalformedRequest, RequestTooLarge, UnsupportedMedia, decode, parse_json, spans_of
from .receiver import DEFAULT_MAX_BODY, OtlpReceiver, ReceiverStats, TraceBuffer

__all__ = [
    "OtlpReceiver", "ReceiverStats", "TraceBuffer", "DEFAULT_MAX_BODY", "rows_for_trace", "classify",
    "group_conversations", "is_loose_call",
    "run_id_for", "decode", "parse_json", "spans_of", "IngestError", "MalformedRequest", "RequestTooLarge",
    "UnsupportedMedia",
]
