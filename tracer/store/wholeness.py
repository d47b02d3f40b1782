"""Is a DuckDB file whole? Its header names how many blocks it holds; a shorter file was cut.

DuckDB reads blocks lazily, so a truncated file (a copy stopped half-way, ``head -c``, a full disk
during a copy) opens without complaint and fails later, mid-query, with "Could not read enough
bytes", after a command may have printed half a table or made an output folder. The header says
it first: the file starts with a 4 KiB main header and two 4 KiB database headers, and the active
one (the higher ``iteration``) holds ``block_count`` and ``block_alloc_size``, so the whole file is
at least ``3 * 4096 + block_count * block_alloc_size`` bytes.

Two cautions decide where it is called. During another process's checkpoint the header can run
ahead of the blocks (seen under ``looptrace fork``), so a short file alone proves nothing while the
store is in use: it only explains a read that already failed (``corrupt_store``), or is checked
twice, a moment apart, by ``looptrace compact`` before it opens the file. And reading the file here
opens and closes a descriptor of it, which drops every POSIX lock this process holds on the file,
DuckDB's included: never call it while this process has the store open.

Layout (DuckDB's ``DatabaseHeader``, storage version 64+): after an 8-byte checksum, little-endian
uint64 ``iteration``, ``meta_block``, ``free_list``, ``block_count``, ``block_alloc_size``, ... A
header this code does not understand (an older layout, values out of range) proves nothing, and
the file is left to DuckDB.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

from .errors import StoreError

__all__ = ["cut_short", "check_whole", "is_corruption", "corrupt_store"]

_HEADER = 4096
_DATABASE_HEADERS = (_HEADER, 2 * _HEADER)
_FIELDS = struct.Struct("<8xQQQQQ")  # checksum, iteration, meta_block, free_list, block_count, block_alloc_size
_BLOCK_SIZES = range(14, 31)  # 16 KiB .. 1 GiB, powers of two


def cut_short(path: Path) -> tuple[int, int] | None:
    """``(size, expected)`` when the DuckDB file at ``path`` is shorter than its header says; else None
    (whole, not a DuckDB file, or a header this code cannot read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(3 * _HEADER)
            size = f.seek(0, 2)
    except OSError:
        return None
    if len(head) < 3 * _HEADER or head[8:12] != b"DUCK":
        return None
    best: tuple[int, int] | None = None  # (iteration, expected size)
    for offset in _DATABASE_HEADERS:
        iteration, _, _, blocks, block_size = _FIELDS.unpack_from(head, offset)
        if block_size <= 0 or block_size & (block_size - 1) or block_size.bit_length() - 1 not in _BLOCK_SIZES:
            return None
        if blocks > (1 << 40):
            return None
        if best is None or iteration > best[0]:
            best = (iteration, 3 * _HEADER + blocks * block_size)
    assert best is not None
    return (size, best[1]) if size < best[1] else None


def check_whole(path: Path, *, settle: float = 0.5) -> None:
    """Refuse a file shorter than its header says, twice ``settle`` seconds apart with the same size
    (a checkpoint under way in another process ends well within that). Only before this process
    opens the store (see above)."""
    short = cut_short(path)
    if short is None:
        return
    time.sleep(settle)
    again = cut_short(path)
    if again is not None and again == short:
        raise _cut_short_error(path, *again)


def is_corruption(exc: BaseException) -> bool:
    """A DuckDB error that says the file itself is damaged (a block's checksum, a short read): it
    surfaces mid-query, wherever the damaged block is first read, so readers and writers turn it
    into a ``StoreError`` where they hand out their connection."""
    text = str(exc)
    return "Corrupt database file" in text or "Could not read enough bytes" in text


def corrupt_store(path: Path, exc: BaseException) -> StoreError:
    """The error for a damaged file; call it once this process's connection to it is closed."""
    short = cut_short(path)
    if short is not None:
        return _cut_short_error(path, *short)
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return StoreError(f"{path}: not a readable looptrace store: the file is damaged ({first}). Restore it from a "
                      "whole copy; it was not changed.")


def _cut_short_error(path: Path, size: int, expected: int) -> StoreError:
    return StoreError(
        f"{path}: not a readable looptrace store: the file is cut short ({size:,} of the {expected:,} bytes "
        "its header names: truncated, or copied while it was written). Restore it from a whole copy; "
        "it was not changed."
    )
