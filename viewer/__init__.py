"""The Textual viewer: ``looptrace view PATH``.

Importing this package imports nothing heavy: ``looptrace --help`` registers ``viewer.commands``
without loading Textual. The app lives in ``viewer.app``; every database read in ``viewer.data``
(which never imports Textual either, and a test proves it).
"""

from __future__ import annotations

__all__: list[str] = []
