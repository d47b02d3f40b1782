"""Fork hooks that do not keep their objects alive: ``os.register_at_fork`` hooks cannot be removed,
so each one holds only a weak reference to the method it calls in the child."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable

__all__ = ["at_fork"]


def at_fork(method: Callable[[], None]) -> None:
    """Call the bound ``method`` in every forked child while its object is alive."""
    if not hasattr(os, "register_at_fork"):
        return
    weak = weakref.WeakMethod(method)  # type: ignore[arg-type]

    def hook() -> None:
        bound = weak()
        if bound is not None:
            bound()

    os.register_at_fork(after_in_child=hook)
