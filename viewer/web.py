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


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(path: Path, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, refresh: float = 2.0) -> None:
    """Serve the viewer on http://host:port until interrupted; port 0 takes a free port, and the first
    line printed names the URL either way. ``CannotServe`` if the address cannot be bound."""
    import asyncio
    import signal

    from aiohttp import web
    from textual_serve.server import Server

    if not is_loopback(host):
        print(f"warning: serving on {host}: anyone who can reach port {port} can read every trace in {path} "
              "and run SQL over it", file=sys.stderr)
    # The socket is bound here and handed to aiohttp, so the port reported is the one served: with
    # port 0 the kernel chooses (tests, several viewers at once), and nothing can take it in between.
    try:
        sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        taken = "the port is taken (another --web viewer? pick another with --port)" \
            if exc.errno in (98, 48) else exc.strerror or str(exc)
        raise CannotServe(f"cannot serve on {host}:{port}: {taken}") from None
    port = sock.getsockname()[1]
    url = f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"
    print(f"looptrace view: serving {path} on {url} (Ctrl-C to stop)", flush=True)
    server = Server(viewer_command(path, refresh), host=host, port=port, title=f"looptrace {path.name}",
                    public_url=url)
    # What Server.serve() does, with our socket instead of host and port.
    server.initialize_logging()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.add_signal_handler(signal.SIGINT, server.request_exit)
    loop.add_signal_handler(signal.SIGTERM, server.request_exit)
    web.run_app(server._make_app(), sock=sock, handle_signals=False, loop=loop, print=lambda *args: None)
