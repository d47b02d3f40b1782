"""The one sink every source hands its records to: normalise, redact, write.

No source writes to the store or calls redaction by itself; ``Sink.write`` is the only road in.
"""

from __future__ import annotations

from .redact import Redactor
from .sink import Sink

__all__ = ["Sink", "Redactor"]
