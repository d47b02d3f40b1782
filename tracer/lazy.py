"""Package ``__init__``s that import a name only when it is first used (PEP 562).

``import looptrace.tracer.cli`` runs every parent package's ``__init__``; if those imported their
public names eagerly, ``looptrace --help`` would pay for the OpenTelemetry SDK, pyarrow and the
anthropic SDK before printing a line. A package lists where each public name lives and lets this
module fetch it on first access; ``from looptrace.tracer import Tracing`` works unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``where`` maps a public name to the module
    (relative to ``package``, like ``.spans.tracing``) that defines it."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        # Cached on the package: the next access is a plain attribute lookup.
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(where) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__
