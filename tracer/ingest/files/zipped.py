"""Members of a zip archive, including the zstd-compressed ones Inspect AI writes.

Inspect's ``.eval`` logs are zips whose members are compressed with zstd (method 93), which the
standard library reads only from Python 3.14. Rather than patch ``zipfile`` globally (as
``zipfile-zstd`` does), we read such a member's raw bytes ourselves and stream them through
``zstandard``. Each member is read on its own, so a log's size is bounded by its largest sample,
not by the archive.
"""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path
from typing import IO

from .errors import TrajectoryFormatError

__all__ = ["ZSTD", "open_zip", "read_member"]

ZSTD = 93  # the zip compression method number of zstd (APPNOTE 4.4.5)
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # the fixed 30 bytes before a member's name


def open_zip(path: Path) -> zipfile.ZipFile:
    """``path`` as a zip archive, or the reason it is not one."""
    try:
        return zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise TrajectoryFormatError(f"not a zip archive ({exc})") from exc
    except OSError as exc:
        raise TrajectoryFormatError(f"cannot read the file ({exc.strerror or exc})") from exc


def _raw(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> IO[bytes]:
    fp = archive.fp
    assert fp is not None
    fp.seek(info.header_offset)
    header = fp.read(_LOCAL_HEADER.size)
    if len(header) < _LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        raise TrajectoryFormatError(f"damaged zip member {info.filename!r}")
    fields = _LOCAL_HEADER.unpack(header)
    fp.seek(fields[9] + fields[10], 1)  # the name and the extra field
    return fp  # positioned at the member's compressed bytes


def read_member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """The decompressed bytes of member ``name`` (at most ``limit``), or the reason they cannot be read."""
    try:
        info = archive.getinfo(name)
    except KeyError as exc:
        raise TrajectoryFormatError(f"the archive has no {name!r}") from exc
    if info.file_size > limit:
        raise TrajectoryFormatError(f"{name} is larger than {limit >> 20} MiB")
    try:
        if info.compress_type != ZSTD:
            return archive.read(name)
        import zstandard

        raw = io.BytesIO(_raw(archive, info).read(info.compress_size))
        with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
            data = reader.readall()
        if len(data) != info.file_size:
            raise TrajectoryFormatError(f"damaged zip member {name!r} (size differs)")
        return data
    except (zipfile.BadZipFile, NotImplementedError, EOFError, OSError) as exc:
        raise TrajectoryFormatError(f"cannot read {name!r} from the archive ({exc})") from exc
    except Exception as exc:  # zstandard.ZstdError and friends
        if isinstance(exc, TrajectoryFormatError):
            raise
        raise TrajectoryFormatError(f"cannot decompress {name!r} ({type(exc).__name__}: {exc})") from exc
