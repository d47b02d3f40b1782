"""``looptrace collect``: an OTLP/HTTP receiver writing into a store until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from ..cli.main import add_command
from ..store import DEFAULT_DB

__all__ = ["register"]


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the receiver the way Ctrl-C does: buffered traces are written


def _collect(args: argparse.Namespace) -> int:
    from ..store import Store, StoreError
    from .otlp.receiver import OtlpReceiver

    receiver = OtlpReceiver(args.db, host=args.host, port=args.port, settle=args.settle,
                            max_body=int(args.max_body_mb * (1 << 20)))
    try:
        receiver.start()
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    previous = signal.signal(signal.SIGTERM, _stop)
    print(f"looptrace collect: listening on {receiver.url}, writing to {args.db} (Ctrl-C to stop)",
          flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        receiver.stop()
    s = receiver.stats
    print(f"looptrace collect: {s.spans_written} spans written in {s.traces_written} traces "
          f"({s.incomplete_traces} incomplete, {s.late_spans} late, {s.duplicate_spans} duplicates dropped); "
          f"{s.requests} export requests, {s.rejected} refused", flush=True)
    if s.refused_traces or s.lost_spans:
        print(f"warning: the store refused the runs of {s.refused_traces} traces (kept as spans) and "
              f"{s.lost_spans} spans; last error: {s.last_error}", file=sys.stderr)
    try:
        if s.spans_written:
            Store(args.db).try_compact()
    except StoreError as exc:  # the segments stay; the next reader absorbs them
        print(f"warning: could not compact {args.db}: {exc}", file=sys.stderr)
    if receiver.unwritten_spans:
        print(f"error: {receiver.unwritten_spans} spans could not be written ({s.last_error})",
              file=sys.stderr)
    return 1 if receiver.unwritten_spans or s.lost_spans else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "collect", "Receive OpenTelemetry traces over OTLP/HTTP (protobuf or JSON) into a store; spans "
        "of the GenAI, OpenInference and OpenLLMetry conventions become runs and steps.",
        f"looptrace collect --db {DEFAULT_DB} --port 4318   # then OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
    )
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=4318,
                   help="port to listen on (default 4318, the OTLP/HTTP port; 0 picks a free one)")
    p.add_argument("--max-body-mb", type=float, default=64.0,
                   help="refuse request bodies larger than this, decompressed, with 413 (default 64)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds a trace whose root has arrived waits for late spans before it is written "
                   "(default 2)")
    p.set_defaults(func=_collect)
