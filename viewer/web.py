"""``looptrace view --web``: the same Textual app in a browser, served by textual-serve.

textual-serve starts one viewer process per browser tab (``python -m looptrace.viewer PATH``) and
relays its terminal over a websocket to xterm.js in the page: there is no second UI to keep in step
with the terminal one. It binds to 127.0.0.1 unless told otherwise, because whoever reaches the port
can read every trace in the store and run SQL over it.
"""

from __future__ import annotations

import ipaddress
import shlex
import socket
import sys
from pathlib import Path

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "viewer_command", "serve", "is_loopback", "CannotServe"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8008


def viewer_command(path: Path, refresh: float) -> str:
    """The shell command textual-serve runs for each browser tab (it splits it with shlex)."""
    return shlex.join([sys.executable, "-m", "looptrace.viewer", str(path.resolve()), "--refresh", f"{refresh:g}"])


class CannotServe(OSError):
    """The address cannot be served on (the port is taken, the host is not this machine's)."""


def _check_address(host: str, port: int) -> None:
    """Bind the address once before textual-serve does: it prints its banner and "Serving on ..."
    first, then fails inside aiohttp with a traceback when the port is taken. aiohttp binds with
    SO_REUSEADDR, so this probe does too (a port in TIME_WAIT is free for both)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise CannotServe(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            taken = "the port is taken (another --web viewer? pick another with --port)" \
                if exc.errno in (98, 48) else exc.strerror or str(exc)
            raise CannotServe(f"cannot serve on {host}:{port}: {taken}") from None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(path: Path, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, refresh: float = 2.0) -> None:
    """Serve the viewer on http://host:port until interrupted; ``CannotServe`` if the address is not free."""
    from textual_serve.server import Server

    _check_address(host, port)
    if not is_loopback(host):
        print(f"warning: serving on {host}: anyone who can reach port {port} can read every trace in {path} "
              "and run SQL over it", file=sys.stderr)
    try:
        Server(viewer_command(path, refresh), host=host, port=port, title=f"looptrace {path.name}").serve()
    except OSError as exc:  # taken between the probe and the bind
        raise CannotServe(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
