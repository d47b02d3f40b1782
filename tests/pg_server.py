"""A real PostgreSQL server for the catalog tests, started from the machine's installation.

The catalog a team shares is pyiceberg's SQL catalog on PostgreSQL (docs/scale.md), so the catalog
suites run on one: ``initdb`` into a fresh folder under the system's temporary directory, then
``pg_ctl start`` on a free port of 127.0.0.1 with its unix socket in that folder. Nothing of the
machine's own clusters is touched. PostgreSQL refuses to run as root, so under root both run as the
``postgres`` user that Debian's package creates, and the folder is theirs: pytest's own temporary
folders are ``0700`` root's, which that user cannot enter, hence ``tempfile.mkdtemp`` in ``/tmp``.

A server is per pytest session (``conftest.postgres``): under pytest-xdist each worker is its own
session, so each has its own server, and each test asks it for a database of its own
(``create_database``). ``fsync=off``: the server's own crash safety is PostgreSQL's business, not
what these tests measure, and fsyncs on a shared machine cost seconds. Stopping is ``-m fast`` (a
clean shutdown that ends open sessions), which is also how ``restart`` emulates a maintenance restart.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PostgresServer", "pg_bin", "PostgresMissing", "USER", "PASSWORD"]

USER, PASSWORD = "looptrace", "secret"  # as docs/scale.md's walk-through names them
_START_TRIES = 5  # a free port found by binding 0 can be taken by another process before postgres binds it


class PostgresMissing(RuntimeError):
    """No PostgreSQL installation on this machine (``make postgresql`` installs Debian's)."""


def pg_bin() -> Path:
    """The folder with ``initdb`` and ``pg_ctl``: PATH first, else the newest Debian installation."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl", path=str(Path(found).resolve().parent)):
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                      key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    if versions:
        return Path(versions[-1]).parent
    raise PostgresMissing("PostgreSQL is not installed (no initdb on PATH or under /usr/lib/postgresql): "
                          "`make postgresql` installs Debian's")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster in a temporary folder, listening on 127.0.0.1:``port``."""

    def __init__(self) -> None:
        self.bin = pg_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="looptrace-pg-"))
        self.data = self.folder / "data"
        self.port = 0
        self._owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._owner = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresMissing("running as root and there is no postgres user to run PostgreSQL as") from None
            os.chown(self.folder, self._owner.pw_uid, self._owner.pw_gid)
        password = self.folder / "password"
        password.write_text(PASSWORD + "\n")
        if self._owner is not None:
            os.chown(password, self._owner.pw_uid, self._owner.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={password}", "-E", "UTF8",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "--no-instructions")
        password.unlink()

    def _run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.bin / tool), *args], capture_output=True, text=True, timeout=timeout,
                              cwd=self.folder, user=self._owner.pw_uid if self._owner else None,
                              group=self._owner.pw_gid if self._owner else None)
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}{tail}")
        return done

    def start(self) -> PostgresServer:
        """Start on a free port (the same one again after a ``stop``, so clients' URIs stay right)."""
        for attempt in range(_START_TRIES):
            port = self.port or _free_port()
            options = (f"-p {port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                       "-c full_page_writes=off -c max_connections=200")
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                          "-o", options, "start")
            except RuntimeError:
                if self.port or attempt == _START_TRIES - 1:
                    raise
                continue  # the port was taken meanwhile: another
            self.port = port
            return self
        raise AssertionError("unreachable")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self, down_for: float = 0.0) -> None:
        """Stop (ending every open session), stay down ``down_for`` seconds, start on the same port."""
        self.stop()
        time.sleep(down_for)
        self.start()

    def uri(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg2://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        """Run one statement as the superuser over the unix socket (no driver needed: psql)."""
        self._run("psql", "-h", str(self.folder), "-p", str(self.port), "-U", USER, "-d", database,
                  "-v", "ON_ERROR_STOP=1", "-q", "-c", statement)

    def create_database(self, name: str) -> str:
        """A new empty database ``name``; its SQLAlchemy URI."""
        self.sql(f'CREATE DATABASE "{name}"')
        return self.uri(name)

    def close(self) -> None:
        """Stop the server if it runs, and remove its folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
