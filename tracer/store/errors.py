"""The store's one error type: its message is what the user reads, naming the file and what to do."""

from __future__ import annotations

__all__ = ["StoreError"]


class StoreError(Exception):
    """The store cannot be opened or written as asked. The message names the file and the remedy."""
