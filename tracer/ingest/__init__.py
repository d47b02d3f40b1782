"""Ways data comes in from outside looptrace: OTLP over HTTP (``otlp/``) and files (``files/``).

Both end in the sink (``tracer/sink``), the same as looptrace's own spans.
"""

from __future__ import annotations

__all__ = ["files", "otlp"]  # the two subpackages; each has its own public API
