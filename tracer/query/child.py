"""The process one user query runs in (``python -m looptrace.tracer.query.child``, or forked from a
single-threaded caller), under an OS memory ceiling; ``supervise.py`` starts it, sets its deadline
and kills it when the deadline passes.

DuckDB's ``memory_limit`` does not cover large scalar results (one ``repeat`` of 3 GB peaked at
5.9 GB against a 2 GB limit), and ``interrupt()`` is only checked between chunks, so a single long
scalar runs on past any timeout. Only a process boundary bounds both: ``RLIMIT_AS`` makes an
allocation past the ceiling fail inside this process, and the parent's kill ends any query on time.

Protocol, binary over the pipes: the parent writes one pickled ``Request`` to stdin and closes it;
the child writes ``READY`` once the session is open (the time limit counts from there, so absorbing
pending segments is not charged to the query), then one pickled ``(kind, payload)``: ``("ok",
QueryResult)``, ``("error", message)`` or ``("memory", message)``.
"""

from __future__ import annotations

import os
import pickle
import resource
import sys
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

if TYPE_CHECKING:
    from ..export.source import ParquetSource
    from ..store import Store

__all__ = ["Request", "READY", "HEADROOM_BYTES", "main", "run"]

READY = b"R"
# The interpreter, DuckDB and pyarrow reserve ~0.8 GB of address space before any query (thread
# stacks, arenas; resident memory is ~70 MB): the ceiling is the limit plus this.
HEADROOM_BYTES = 1 << 30


class Request(NamedTuple):  # not a dataclass: ``dataclasses`` imports ``inspect``, a start-up cost
    source: Store | ParquetSource | str  # a path is opened here, so the parent needs no DuckDB
    sql: str
    limit: int | None
    timeout: float
    memory_bytes: int
    scratch: str  # a private folder for spill files, made and removed by the parent


def _memory_message(memory_bytes: int) -> str:
    return f"query stopped: over the {memory_bytes / 2**30:g} GB memory limit; add a LIMIT or a WHERE"


def _is_memory(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "bad_alloc" in text or \
        "could not allocate" in text


def _answer(out: BinaryIO, kind: str, payload: Any) -> None:
    out.write(pickle.dumps((kind, payload), protocol=pickle.HIGHEST_PROTOCOL))
    out.flush()


def _open(path: str) -> Store | ParquetSource | Any:
    """``open_source(path)``; a store file, the common case, without importing the export and catalog
    modules (dataclasses, pyiceberg), which are start-up cost of every ``looptrace sql``."""
    from ..store.backend import catalog_name

    if catalog_name(path) is None and not os.path.isdir(path):
        from ..store.store import Store

        return Store(path)
    from ..export.source import open_source

    return open_source(path)


def serve(request: Request, out: BinaryIO) -> None:
    from ..store import StoreError
    from ..store.wholeness import corrupt_store, is_corruption
    from .session import QueryError, execute

    # MemoryError is an Exception: the last branch below names it as the memory limit too.
    mb = max(1, request.memory_bytes >> 20)
    try:
        source = request.source
        if isinstance(source, str):
            source = _open(source)
        with source.reader(locked_down=True, memory_limit=f"{mb}MB", scratch=request.scratch) as conn:
            out.write(READY)
            out.flush()
            result = execute(conn, request.sql, limit=request.limit, timeout=request.timeout)
            data = pickle.dumps(("ok", result), protocol=pickle.HIGHEST_PROTOCOL)
    except QueryError as exc:
        cause = exc.__cause__
        if cause is not None and _is_memory(cause):
            _answer(out, "memory", _memory_message(request.memory_bytes))
        elif cause is not None and is_corruption(cause) and hasattr(source, "path"):
            # a damaged or truncated store file, met mid-query: said as every command says it
            _answer(out, "error", " ".join(str(corrupt_store(source.path, cause)).split()))
        else:
            _answer(out, "error", str(exc))
        return
    except StoreError as exc:
        _answer(out, "error", " ".join(str(exc).split()))
        return
    except Exception as exc:  # noqa: BLE001 - the parent gets one line; the child exits anyway
        if _is_memory(exc):
            _answer(out, "memory", _memory_message(request.memory_bytes))
        else:
            _answer(out, "error", f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        return
    out.write(data)
    out.flush()


def run(request: Request, answer_fd: int) -> None:
    """Serve ``request`` in this process, the query's own, writing the protocol to ``answer_fd``."""
    from . import session  # noqa: F401 - imported before the ceiling is set, not charged to the query

    ceiling = request.memory_bytes + HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, ceiling))
    # The answer gets a descriptor of its own: DuckDB writes its progress bar to fd 1, which would
    # otherwise tear the pickled answer. Anything else written to stdout goes nowhere.
    answer = os.fdopen(answer_fd, "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    serve(request, answer)
    answer.close()


def main() -> None:
    run(pickle.loads(sys.stdin.buffer.read()), os.dup(1))


if __name__ == "__main__":
    main()
