"""An output folder a command makes is gone again if the command fails before finishing it.

``looptrace report --all -o DIR`` and ``looptrace export --parquet DIR`` make their folder first;
a store that then turns out to be unreadable left an empty folder (or one holding only a lock
file) that the next attempt had to be told about. A folder that existed before is left as found,
less what this command added to it is the writer's business (exports stage and publish atomically).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["output_folder"]


@contextmanager
def output_folder(folder: Path) -> Iterator[Path]:
    """``folder``, created with its parents if missing, and removed whole (with the parents made for
    it) if the block raises."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        for made in missing:  # innermost first
            if made == folder:
                shutil.rmtree(made, ignore_errors=True)
            else:
                _rmdir_empty(made)
        raise


def _rmdir_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
