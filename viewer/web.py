"""``looptrace view --web``: the same Textual app in a browser, served by textual-serve.

textual-serve starts one viewer process per browser tab (``python -m looptrace.viewer PATH``) and
relays its terminal over a websocket to xterm.js in the page: there is no second UI to keep in step
with the terminal one. It binds to 127.0.0.1 unless told otherwise, because whoever reaches the port
can read every trace in the store and run SQL over it.
"""

from __future__ import annotations

import ipaddress
import shlex
import sys
from pathlib import Path

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "viewer_command", "serve", "is_loopback"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8008


def viewer_command(path: Path, refresh: float) -> str:
    """The shell command textual-serve runs for each browser tab (it splits it with shlex)."""
    return shlex.join([sys.executable, "-m", "looptrace.viewer", str(path.resolve()), "--refresh", f"{refresh:g}"])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(path: Path, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, refresh: float = 2.0) -> None:
    """Serve the viewer on http://host:port until interrupted."""
    from textual_serve.server import Server

    if not is_loopback(host):
        print(f"warning: serving on {host}: anyone who can reach port {port} can read every trace in {path} "
              "and run SQL over it", file=sys.stderr)
    Server(viewer_command(path, refresh), host=host, port=port, title=f"looptrace {path.name}").serve()
