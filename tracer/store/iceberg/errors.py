"""Errors of the catalog backend, and the one loop that retries what is worth retrying.

Three kinds of failure, told apart here once for every catalog operation:

- **A race** (``transient``): a commit that lost the compare-and-swap to another writer and that
  pyiceberg gave up retrying, a delete or overwrite that found files added meanwhile in its buckets
  (another writer's runs), SQLite busy with another writer. Retried, after a refresh, for minutes.
- **Unavailable** (``CatalogUnavailable``): the catalog's database cannot be reached (down,
  restarting, a network cut) or the warehouse cannot be read or written (full, read-only, gone). An
  ``OSError``, like a full disk under a DuckDB store: a receiver holds the traces in its journal and
  writes them on its next round; a one-shot command stops with the message. A lost connection is
  tried again for ``UNAVAILABLE_GRACE`` seconds first (a pooled connection a restart closed), but
  never for an append, whose commit may have landed with only its answer lost.
- **Anything else**: re-raised as it is (a value the store refuses, a misconfiguration).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import StoreError

__all__ = ["CatalogError", "CatalogUnavailable", "UNAVAILABLE_GRACE", "retrying", "retrying_on", "transient",
           "created_meanwhile"]

# A lost connection to the catalog's database is retried this long before it is reported: enough for
# a pooled connection a server restart closed to be replaced, short enough that a receiver's flusher
# is soon back to answering from its journal (it retries the whole write on its next round).
UNAVAILABLE_GRACE = 3.0
_T = TypeVar("_T")
log = logging.getLogger(__name__)


class CatalogError(StoreError):
    """A catalog that cannot be loaded, read or written, with what to do about it."""


class CatalogUnavailable(CatalogError, OSError):
    """The catalog's database cannot be reached (down, restarting, a network cut), or its warehouse
    refuses a file (full, read-only, gone). An ``OSError`` too, like a full disk under a DuckDB store:
    a writer that can wait (the receiver, its spans in its journal) holds the rows and tries again."""


def _unreachable(exc: BaseException) -> bool:
    """A failed or lost connection to the catalog's database (SQLAlchemy's disconnect errors), not a
    statement the database refused; SQLite's "locked" is a race (``transient``), not this."""
    try:
        from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
    except ImportError:
        return False
    if not isinstance(exc, DBAPIError) or transient(exc):
        return False
    return bool(exc.connection_invalidated) or isinstance(exc, (OperationalError, InterfaceError))


def _unavailable(what: str, exc: BaseException) -> CatalogUnavailable:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, OSError):
        return CatalogUnavailable(f"{what}: the warehouse could not be read or written ({first})")
    return CatalogUnavailable(f"{what}: the catalog's database is unreachable ({first})")


def transient(exc: BaseException) -> bool:
    """A commit that lost a race pyiceberg gave up on, or SQLite busy with another writer."""
    if isinstance(exc, StoreError):
        return False
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    # ValidationException: a delete or overwrite found files added meanwhile in the partitions it
    # touches (another writer's runs: same bucket, not the same rows); refreshed, it commits.
    if isinstance(exc, (CommitFailedException, ValidationException)):
        return True
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def created_meanwhile(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "duplicate key" in text or "already exists" in text


def retrying(fn: Callable[[], _T], what: str, deadline: float = 600.0,
             also: Callable[[BaseException], bool] | None = None, *, idempotent: bool = True) -> _T:
    """``fn()``, again while it loses races (``transient``, or ``also``) until ``deadline`` seconds.
    A database that cannot be reached is tried for ``UNAVAILABLE_GRACE`` seconds, then reported, like
    a warehouse that refuses a file, as ``CatalogUnavailable`` (an OSError: the caller may wait).
    Not ``idempotent`` (an append): a connection lost during the commit may have lost only the answer,
    so it is reported at once; the caller removes what may have landed before writing again."""
    start = time.monotonic()
    delay = 0.02
    while True:
        try:
            return fn()
        except CatalogError:
            raise
        except Exception as exc:  # noqa: BLE001 - only transient ones are retried, the rest re-raised
            waited = time.monotonic() - start
            if _unreachable(exc):
                if not idempotent or waited >= min(deadline, UNAVAILABLE_GRACE):
                    raise _unavailable(what, exc) from exc
            elif isinstance(exc, OSError):
                raise _unavailable(what, exc) from exc
            elif not (transient(exc) or (also is not None and also(exc))) or waited >= deadline:
                raise
            log.debug("looptrace: %s failed for now (%s); retrying", what, exc)
        time.sleep(delay * (1 + random.random()))
        delay = min(delay * 2, 1.0)


def retrying_on(tbl: Any, fn: Callable[[], _T], what: str, **kw: Any) -> _T:
    """``retrying(fn, what, **kw)`` for a write to the Iceberg table ``tbl``: a lost race refreshes
    ``tbl`` before the next attempt, so that it is made on the table as another writer left it."""
    def attempt() -> _T:
        try:
            return fn()
        except Exception as exc:
            if transient(exc):
                tbl.refresh()
            raise

    return retrying(attempt, what, **kw)
