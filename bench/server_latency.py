"""Latency of one ``messages.create`` call against the scripted Messages API server.

The comparison is a stock ``http.server`` handler, written the way the standard library's docs
suggest (HTTP/1.0, ``send_response``/``send_header``/``end_headers``, then the body in its own write,
Nagle's algorithm left on), answering with the same JSON. The gap between the two is what
``loop/server.py``'s single write, ``TCP_NODELAY`` and keep-alive buy (see its docstring). Calls to
the two servers are interleaved one by one, so noise hits both equally.

Expect the stock server to be only a little slower here: HTTP/1.0 closes the connection after each
response, and on a fresh connection Linux ACKs at once (quick-ACK mode), so the ~40 ms Nagle /
delayed-ACK stall never happens. It shows with keep-alive: the same handler with
``protocol_version = "HTTP/1.1"`` took a median of ~44 ms per call when this was written.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic

from looptrace.loop.replies import Reply, message_body
from looptrace.loop.server import MessagesServer

from .results import Result

__all__ = ["TITLE", "run"]

TITLE = "server_latency: anthropic SDK messages.create round trip on loopback"
GOAL_MS = 5.0
REPLY = Reply(content=[{"type": "text", "text": "hello"}])
REQUEST: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "hi"}],
}


class _StockHandler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        data = json.dumps(message_body(REPLY, body, "msg_000000000000000000000001")).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _call_ms(client: anthropic.Anthropic) -> float:
    t0 = time.perf_counter()
    client.messages.create(**REQUEST)
    return (time.perf_counter() - t0) * 1e3


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def run(quick: bool = False) -> list[Result]:
    calls = 60 if quick else 300
    stock = ThreadingHTTPServer(("127.0.0.1", 0), _StockHandler)
    stock.daemon_threads = True
    thread = threading.Thread(target=stock.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        with MessagesServer(lambda body: REPLY) as server:
            ours_client = anthropic.Anthropic(api_key="bench", base_url=server.base_url, max_retries=0)
            stock_client = anthropic.Anthropic(
                api_key="bench", base_url=f"http://127.0.0.1:{stock.server_port}", max_retries=0
            )
            with ours_client, stock_client:
                for _ in range(5):  # warm-up: connection pools, the SDK's lazy imports
                    _call_ms(ours_client), _call_ms(stock_client)
                ours: list[float] = []
                theirs: list[float] = []
                for i in range(calls):
                    if i % 2 == 0:
                        ours.append(_call_ms(ours_client))
                        theirs.append(_call_ms(stock_client))
                    else:
                        theirs.append(_call_ms(stock_client))
                        ours.append(_call_ms(ours_client))
    finally:
        stock.shutdown()
        stock.server_close()
        thread.join()
    med_ours, med_theirs = statistics.median(ours), statistics.median(theirs)
    note = f"{calls} calls each, interleaved; p90: looptrace {_p90(ours):.2f} ms, stock {_p90(theirs):.2f} ms"
    return [
        Result("median latency", "ms", med_ours, med_theirs, f"looptrace < {GOAL_MS:g} ms",
               med_ours < GOAL_MS, note)
    ]
