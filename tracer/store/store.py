"""Opening a store: a short exclusive write that absorbs segments, then read-only sessions.

Every process that opens the DuckDB file holds it only for as long as it needs: a writer for the
moment it takes to migrate and absorb pending segments, a reader for one session. A reader first
tries to absorb (so the file catches up), then attaches the file read-only in an in-memory DuckDB
and adds the segments still pending, so it sees every flushed step even while another process holds
the file. See README "Many writers, live readers".
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from . import segments as seg
from .absorb import absorb
from .errors import StoreError
from .migrations import SCHEMA_VERSION, apply_views, migrate, schema_version
from .opening import NO_EXTENSIONS, first_line, is_lock_error, retry_locked, sql_str
from .pathlocks import path_lock as _path_lock
from .session import file_views, lockdown, session_views
from .wholeness import corrupt_store, is_corruption

__all__ = ["Store", "DEFAULT_WAIT", "is_lock_error", "lockdown"]

log = logging.getLogger(__name__)

DEFAULT_WAIT = 15.0  # seconds a caller waits for another process's short hold on the file


class Store:
    """A looptrace store: ``path`` (a DuckDB file) plus ``path.segments/`` written by live processes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.segments_dir = seg.segments_dir(self.path)

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"

    # -- writing -------------------------------------------------------------------------------

    def _connect(self, wait: float) -> duckdb.DuckDBPyConnection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                self._create()
            self._keep_wal()
        except OSError as exc:
            raise StoreError(f"{self.path}: cannot create the store: {exc}") from exc
        return retry_locked(lambda: duckdb.connect(str(self.path), config=NO_EXTENSIONS), wait, self.path)

    def _create(self) -> None:
        """Make a new store under a temporary name and link it into place, so a crash or a full disk
        mid-creation never leaves a half-made file where the store should be."""
        tmp = self.path.with_name(f"{self.path.name}.creating-{os.getpid()}-{time.time_ns()}")
        try:
            conn = duckdb.connect(str(tmp), config=NO_EXTENSIONS)
            try:
                migrate(conn, str(self.path))
                conn.execute("CHECKPOINT")
            finally:
                conn.close()
            try:
                os.link(tmp, self.path)  # fails if another process created it first: theirs stands
            except FileExistsError:
                pass
            except OSError:  # a file system without hard links
                if not self.path.exists():
                    os.replace(tmp, self.path)
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot create the store: {first_line(exc)}") from exc
        finally:
            for leftover in (tmp, Path(f"{tmp}.wal")):
                with contextlib.suppress(FileNotFoundError):
                    leftover.unlink()

    def _keep_wal(self) -> None:
        """looptrace closes the file cleanly, so a write-ahead log found here was left by a crash.
        DuckDB replays what it can of it and then deletes it: keep a copy first, never drop it silently."""
        wal = Path(f"{self.path}.wal")
        try:
            if not wal.stat().st_size:
                return
        except FileNotFoundError:  # none, or another process's checkpoint just removed it
            return
        # A live writer in another process has a WAL too: only a WAL nobody holds is a crash's. The
        # probe lock is released (its descriptor closed) before DuckDB opens the file in this process.
        with open(self.path, "rb") as f:
            try:
                fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return
            copy = Path(f"{wal}.found-{time.strftime('%Y%m%dT%H%M%S')}")
            try:
                shutil.copy2(wal, copy)
            except FileNotFoundError:  # its writer checkpointed and removed it before letting go
                return
            log.warning("looptrace: %s was left by a crash; a copy is kept as %s. DuckDB replays what it "
                        "can of it; if the store looks wrong, move %s aside and reopen.", wal, copy, wal)

    @contextmanager
    def writer(self, *, wait: float = DEFAULT_WAIT) -> Iterator[duckdb.DuckDBPyConnection]:
        """An exclusive read-write connection, migrated and caught up with all segments. Keep it short."""
        with _path_lock(self.path):
            conn = self._connect(wait)
            try:
                migrate(conn, str(self.path))
                absorb(conn, self.path, self.segments_dir)
                yield conn
            except duckdb.Error as exc:
                if not is_corruption(exc):
                    raise
                conn.close()  # before describing the file: see ``corrupt_store``
                raise corrupt_store(self.path, exc) from exc
            finally:
                conn.close()

    def compact(self, *, wait: float = DEFAULT_WAIT) -> int:
        """Absorb all complete segments into the DuckDB file; return how many were absorbed."""
        with _path_lock(self.path):
            conn = self._connect(wait)
            try:
                migrate(conn, str(self.path))
                return absorb(conn, self.path, self.segments_dir)
            except duckdb.Error as exc:
                if not is_corruption(exc):
                    raise
                conn.close()  # before describing the file: see ``corrupt_store``
                raise corrupt_store(self.path, exc) from exc
            finally:
                conn.close()

    def try_compact(self) -> int | None:
        """Absorb if the file is free right now; None if another process holds it."""
        try:
            return self.compact(wait=0.0)
        except StoreError as exc:
            if isinstance(exc.__cause__, duckdb.Error) and is_lock_error(exc.__cause__):
                return None
            raise

    # -- reading -------------------------------------------------------------------------------

    @contextmanager
    def reader(
        self, *, locked_down: bool = True, absorb: bool = True, wait: float = DEFAULT_WAIT,
        memory_limit: str = "2GB", scratch: str | None = None,
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only session over the store and every flushed segment.

        With ``locked_down`` (the default for user SQL) the session cannot touch files, load
        extensions or change settings: see ``lockdown``.
        """
        if not self.path.exists() and not self.segments_dir.exists():
            raise StoreError(f"{self.path}: no such store (nothing has been traced or imported into it yet)")
        # One DuckDB process cannot attach the same file twice at once: sessions of one path take turns.
        with _path_lock(self.path):
            # Take the file for writing only when there is something to absorb or migrate.
            if absorb and (not self.path.exists() or seg.list_segments(self.segments_dir)):
                self._try_compact(wait)
            conn = self._attach(wait)
            if schema_version(conn, "store") < SCHEMA_VERSION:
                conn.close()
                self._try_compact(wait)
                conn = self._attach(wait)
            try:
                if not (locked_down and file_views(conn, self.segments_dir)):
                    session_views(conn, self.segments_dir)
                    apply_views(conn)
                if locked_down:
                    lockdown(conn, memory_limit=memory_limit, scratch=scratch)
                yield conn
            except duckdb.Error as exc:
                if not is_corruption(exc):
                    raise
                conn.close()  # before describing the file: see ``corrupt_store``
                raise corrupt_store(self.path, exc) from exc
            finally:
                conn.close()

    def _try_compact(self, wait: float) -> None:
        try:
            self.compact(wait=min(wait, 1.0) if self.path.exists() else wait)
        except StoreError as exc:
            if not (isinstance(exc.__cause__, duckdb.Error) and is_lock_error(exc.__cause__)):
                raise
            # Busy: another process is absorbing or reading. Read what is there plus segments.

    def _attach(self, wait: float) -> duckdb.DuckDBPyConnection:
        conn = duckdb.connect(config=NO_EXTENSIONS)
        try:
            retry_locked(
                lambda: conn.execute(f"ATTACH '{sql_str(self.path)}' AS store (READ_ONLY)"), wait, self.path
            )
            version = schema_version(conn, "store")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path}: written by a newer looptrace (schema version {version}); upgrade looptrace."
                )
        except BaseException:
            conn.close()
            raise
        return conn
