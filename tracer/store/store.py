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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import duckdb

from . import segments as seg
from .errors import StoreError
from .migrations import SCHEMA_VERSION, apply_views, migrate, schema_version, views_current
from .pathlocks import path_lock as _path_lock
from .tables import RECORD_TABLES
from .wholeness import corrupt_store, is_corruption

__all__ = ["Store", "DEFAULT_WAIT", "is_lock_error"]

log = logging.getLogger(__name__)

DEFAULT_WAIT = 15.0  # seconds a caller waits for another process's short hold on the file
_T = TypeVar("_T")


def is_lock_error(exc: BaseException) -> bool:
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def _not_duckdb(path: Path) -> bool:
    """A non-empty file without DuckDB's magic bytes (``DUCK`` at offset 8): JSON, text, anything.

    Why look: DuckDB picks a reader by extension, so ``x.json`` fails with "Cannot launch in-memory
    database in read-only mode" where ``x.dat`` fails with "not a valid DuckDB database"."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:
        return False
    return len(head) > 0 and head[8:12] != b"DUCK"


def _describe_open_error(path: Path, exc: BaseException) -> StoreError:
    text = str(exc)
    if _not_duckdb(path):
        return StoreError(
            f"{path}: not a readable looptrace store (not a DuckDB database file). "
            "Point --db at a store written by looptrace, or move this file away; it was not changed."
        )
    if ("not a valid DuckDB" in text or "Invalid Input Error" in text or "Serialization" in text
            or "extension" in text.lower()):
        return StoreError(
            f"{path}: not a readable looptrace store ({text.splitlines()[0]}). "
            "Point --db at a store written by looptrace, or move this file away; it was not changed."
        )
    if is_corruption(exc):
        return corrupt_store(path, exc)
    if "WAL" in text or "replaying" in text.lower():
        return StoreError(
            f"{path}: its write-ahead log ({path}.wal) could not be replayed ({text.splitlines()[0]}). "
            f"Move {path}.wal aside to open the store without the last unflushed writes; nothing was deleted."
        )
    return StoreError(f"{path}: cannot open the store: {text.splitlines()[0]}")


def _retry_locked(fn: Callable[[], _T], wait: float, path: Path) -> _T:
    deadline = time.monotonic() + wait
    delay = 0.01
    while True:
        try:
            return fn()
        except duckdb.Error as exc:
            if not is_lock_error(exc):
                raise _describe_open_error(path, exc) from exc
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"{path}: held by another process for over {wait:.0f}s ({str(exc).splitlines()[0]}). "
                    "looptrace writers never hold it this long: close the other program (a DuckDB shell?)."
                ) from exc
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


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
        return _retry_locked(lambda: duckdb.connect(str(self.path), config=_NO_EXTENSIONS), wait, self.path)

    def _create(self) -> None:
        """Make a new store under a temporary name and link it into place, so a crash or a full disk
        mid-creation never leaves a half-made file where the store should be."""
        tmp = self.path.with_name(f"{self.path.name}.creating-{os.getpid()}-{time.time_ns()}")
        try:
            conn = duckdb.connect(str(tmp), config=_NO_EXTENSIONS)
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
            raise StoreError(f"{self.path}: cannot create the store: {_first_line(exc)}") from exc
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
                self._absorb(conn)
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
                return self._absorb(conn)
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

    def _absorb(self, conn: duckdb.DuckDBPyConnection) -> int:
        names = seg.list_segments(self.segments_dir)
        if not names:
            seg.empty_trash(self.segments_dir)  # what a killed compaction or an older version left
            return 0
        done = {
            r[0]
            for r in conn.execute(
                "SELECT name FROM absorbed_segments WHERE name IN (SELECT unnest(?::VARCHAR[]))", [names]
            ).fetchall()
        }
        fresh = [n for n in names if n not in done]
        try:
            self._insert_segments(conn, fresh)
            absorbed = len(fresh)
        except duckdb.Error:
            # One bad file must not block the rest: absorb one by one, setting aside only segments
            # that cannot be read on their own. A failure to write the database (a full disk) stops
            # here with every segment still pending.
            absorbed = 0
            for name in fresh:
                try:
                    self._insert_segments(conn, [name])
                    absorbed += 1
                except duckdb.Error as exc:
                    problem = self._unreadable(name)
                    if problem is None:
                        raise StoreError(f"{self.path}: could not write absorbed segments ({_first_line(exc)}); "
                                         "they stay pending and nothing was lost") from exc
                    dest = seg.quarantine(self.segments_dir, name)
                    log.warning("looptrace: unreadable segment moved to %s: %s", dest, problem)
        seg.remove_segments(self.segments_dir, [n for n in names if n in done or (self.segments_dir / n).exists()])
        return absorbed

    def _insert_segments(self, conn: duckdb.DuckDBPyConnection, names: list[str]) -> None:
        if not names:
            return
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        conn.execute("BEGIN TRANSACTION")
        try:
            total = 0
            for table in RECORD_TABLES:
                files = seg.segment_files(self.segments_dir, names, table)
                if files:
                    row = conn.execute(
                        f"INSERT INTO {table} BY NAME "
                        "SELECT * FROM read_parquet(?::VARCHAR[], union_by_name = true)",
                        [files],
                    ).fetchone()
                    total += int(row[0]) if row else 0
            conn.executemany(
                "INSERT INTO absorbed_segments VALUES (?, ?, ?)", [[n, now, None] for n in names]
            )
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT has already ended the transaction
                conn.execute("ROLLBACK")
            raise

    def _unreadable(self, name: str) -> str | None:
        """Why a segment cannot be absorbed anywhere (None: it can, so the store was the problem)."""
        trial = duckdb.connect(config=_NO_EXTENSIONS)
        try:
            migrate(trial)
            for table in RECORD_TABLES:
                for f in seg.segment_files(self.segments_dir, [name], table):
                    trial.execute(f"INSERT INTO {table} BY NAME SELECT * FROM read_parquet(?)", [f])
            return None
        except duckdb.Error as exc:
            return _first_line(exc)
        finally:
            trial.close()

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
                if not (locked_down and _file_views(conn, self.segments_dir)):
                    self._session_tables(conn)
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
        conn = duckdb.connect(config=_NO_EXTENSIONS)
        try:
            _retry_locked(
                lambda: conn.execute(f"ATTACH '{_sql_str(self.path)}' AS store (READ_ONLY)"), wait, self.path
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

    def _session_tables(self, conn: duckdb.DuckDBPyConnection) -> None:
        names = seg.list_segments(self.segments_dir)
        if names:
            done = {
                r[0]
                for r in conn.execute(
                    "SELECT name FROM store.absorbed_segments WHERE name IN (SELECT unnest(?::VARCHAR[]))",
                    [names],
                ).fetchall()
            }
            names = [n for n in names if n not in done]
        present = {r[0] for r in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'store'").fetchall()}
        # A file at the current schema version has every column; checking each table against the
        # Arrow schema would migrate an in-memory database per table (~50 ms each, on every read).
        current = schema_version(conn, "store") >= SCHEMA_VERSION
        for table in (*RECORD_TABLES, "absorbed_segments"):
            base = f"store.{table}"
            if table not in present:  # added by a migration this file has not had yet (it was busy)
                import pyarrow as pa  # only here: most reads need no pyarrow, and it costs start-up

                empty = pa.Table.from_pylist([], schema=seg.arrow_schema(table))  # noqa: F841 - read by SQL
                conn.execute(f"CREATE TEMP TABLE _missing_{table} AS SELECT * FROM empty")
                base = f"_missing_{table}"
            files = seg.segment_files(self.segments_dir, names, table) if table in RECORD_TABLES else []
            if files:
                # Copied in now: once locked down, the session may no longer read files.
                try:
                    conn.execute(
                        f"CREATE TEMP TABLE _pending_{table} AS SELECT * FROM read_parquet(?::VARCHAR[], "
                        "union_by_name = true)",
                        [files],
                    )
                except duckdb.IOException:
                    # A segment absorbed and removed since we listed it is already in the file.
                    files = []
            parts = [f"SELECT * FROM {base}"] + ([f"SELECT * FROM _pending_{table}"] if files else [])
            if table in RECORD_TABLES and not current and self._lacks_columns(conn, base, table):
                # A file a migration has not reached yet (it was busy): the columns added since read as NULL.
                import pyarrow as pa

                shape = pa.Table.from_pylist([], schema=seg.arrow_schema(table))  # noqa: F841 - read by SQL
                conn.execute(f"CREATE TEMP TABLE _shape_{table} AS SELECT * FROM shape")
                parts.append(f"SELECT * FROM _shape_{table}")
            conn.execute(f"CREATE VIEW {table} AS " + " UNION ALL BY NAME ".join(parts))

    @staticmethod
    def _lacks_columns(conn: duckdb.DuckDBPyConnection, base: str, table: str) -> bool:
        have = {r[0] for r in conn.execute(f"DESCRIBE {base}").fetchall()}
        return not set(seg.arrow_schema(table).names) <= have


def _file_views(conn: duckdb.DuckDBPyConnection, segments_dir: Path) -> bool:
    """Read the file's own tables and views (``USE store``) when they are the whole store: no segment
    is pending, the file is at this code's schema and its views are this code's. Then the session
    needs no views of its own, whose creation (binding 10 views, ~40 ms CPU) was most of opening a
    store for one query. Only for locked-down sessions, which run queries alone: the file is
    attached read-only, so a caller's non-temporary CREATE would fail there."""
    if seg.list_segments(segments_dir) or schema_version(conn, "store") != SCHEMA_VERSION:
        return False
    conn.execute("USE store")
    if views_current(conn):
        return True
    conn.execute("USE memory")
    return False


# Store files are opened with no extension loading: a SQLite or other file given as a store must be
# refused, not opened through a downloaded extension.
_NO_EXTENSIONS = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def _sql_str(path: Path) -> str:
    return str(path).replace("'", "''")


def lockdown(conn: duckdb.DuckDBPyConnection, *, memory_limit: str = "2GB", scratch: str | None = None) -> None:
    """No file access, no extensions, no setting changes: what user SQL may run under.

    ``scratch`` (a private folder) takes DuckDB's spill files and its secrets folder: otherwise they
    default to ``./.tmp`` and ``~/.duckdb``, and ``duckdb_settings()`` shows the working and home
    directories to the query (docs/reliability.md says what user SQL may see).
    """
    if scratch is not None:
        conn.execute(f"SET temp_directory = '{_sql_str(Path(scratch))}'")
        conn.execute(f"SET secret_directory = '{_sql_str(Path(scratch) / 'secrets')}'")
    conn.execute(f"SET memory_limit = '{memory_limit}'")
    conn.execute("SET autoinstall_known_extensions = false")
    conn.execute("SET autoload_known_extensions = false")
    conn.execute("SET allow_community_extensions = false")
    conn.execute("SET enable_external_access = false")
    # DuckDB draws a progress bar on stdout for a query over ~2 s: inside the viewer (a search over a
    # million steps) that would scribble over the Textual screen. Off before the settings are locked.
    conn.execute("SET enable_progress_bar = false")
    conn.execute("SET lock_configuration = true")
