"""The importers' one error: a file that is not a trajectory we can read. The message is the reason
shown to the user (``skipped PATH: reason``)."""

from __future__ import annotations

__all__ = ["TrajectoryFormatError"]


class TrajectoryFormatError(ValueError):
    """The file cannot be imported; the message says why (bad JSON, wrong structure, unknown format)."""
