"""OTLP in: a receiver for spans from any OpenTelemetry SDK, and the conventions that make them runs.

``otlp`` decodes OTLP/HTTP bodies (protobuf and JSON) into ``PlainSpan`` values; ``conventions`` maps
spans of the OTel GenAI, OpenInference and OpenLLMetry conventions to runs, steps, model calls and
tool calls, one trace at a time; ``receiver`` is the HTTP server behind ``looptrace collect``, holding
each trace until it is complete and writing it as one segment.
"""

from __future__ import annotations

from .conventions import classify, rows_for_trace, run_id_for
from .otlp import (
    IngestError,
    MalformedRequest,
    RequestTooLarge,
    UnsupportedMedia,
    decode,
    parse_json,
    spans_of,
)
from .receiver import DEFAULT_MAX_BODY, OtlpReceiver, ReceiverStats, TraceBuffer

__all__ = [
    "OtlpReceiver", "ReceiverStats", "TraceBuffer", "DEFAULT_MAX_BODY", "rows_for_trace", "classify",
    "run_id_for", "decode", "parse_json", "spans_of", "IngestError", "MalformedRequest", "RequestTooLarge",
    "UnsupportedMedia",
]
