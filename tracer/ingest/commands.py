"""``looptrace collect``: an OTLP/HTTP receiver writing into a store until Ctrl-C."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING

from ..cli.main import add_command
from ..cli.plural import count
from ..store import DEFAULT_DB
from ..store.backend import add_catalog_option, catalog_name, store_target

if TYPE_CHECKING:
    from .otlp.receiver import OtlpReceiver

__all__ = ["register"]


def _stop(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the receiver the way Ctrl-C does: buffered traces are written


def _diagnose_as_they_land(receiver: OtlpReceiver, db: str, every: float, stop: threading.Event) -> None:
    """Every ``every`` seconds in which traces were written, let the on_stored hooks (the analyzer)
    see the runs that have no diagnosis yet: the viewer then shows them diagnosed while collecting."""
    from ..on_stored import notify_stored

    seen = 0
    while not stop.wait(every):
        written = receiver.stats.traces_written
        if written != seen:
            seen = written
            notify_stored(db, out=sys.stdout)


def _collect(args: argparse.Namespace) -> int:
    from ..on_stored import notify_stored
    from ..store import Store, StoreError
    from .otlp.receiver import OtlpReceiver

    args.db = store_target(args)  # --catalog NAME: the sink appends to the catalog's Iceberg tables
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
    stop = threading.Event()
    diagnosing = threading.Thread(target=_diagnose_as_they_land, args=(receiver, args.db, args.diagnose_every, stop),
                                  name="looptrace-diagnose", daemon=True)
    if args.diagnose_every > 0:
        diagnosing.start()
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop.set()
        if diagnosing.is_alive():
            diagnosing.join()
        receiver.stop()
    s = receiver.stats
    print(f"looptrace collect: {count(s.spans_written, 'span')} written in {count(s.traces_written, 'trace')} "
          f"({s.incomplete_traces} incomplete, {s.late_spans} late, {count(s.duplicate_spans, 'duplicate')} dropped); "
          f"{count(s.requests, 'export request')}, {s.rejected} refused", flush=True)
    if s.refused_traces or s.lost_spans:
        print(f"warning: the store refused the runs of {count(s.refused_traces, 'trace')} (kept as spans) and "
              f"{count(s.lost_spans, 'span')}; last error: {s.last_error}", file=sys.stderr)
    try:
        if s.spans_written and catalog_name(args.db) is None:  # a catalog has no segments to absorb
            Store(args.db).try_compact()
    except StoreError as exc:  # the segments stay; the next reader absorbs them
        print(f"warning: could not compact {args.db}: {exc}", file=sys.stderr)
    if s.traces_written and args.diagnose_every > 0:
        notify_stored(args.db, out=sys.stdout)  # the traces written since the last round
    if receiver.unwritten_spans:
        print(f"error: {count(receiver.unwritten_spans, 'span')} could not be written ({s.last_error})",
              file=sys.stderr)
    return 1 if receiver.unwritten_spans or s.lost_spans else 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub, "collect", "Receive OpenTelemetry traces over OTLP/HTTP (protobuf or JSON) into a store; spans "
        "of the GenAI, OpenInference and OpenLLMetry conventions become runs and steps.",
        f"looptrace collect --db {DEFAULT_DB} --port 4318   # then OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
    )
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    add_catalog_option(p, reads=False)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=4318,
                   help="port to listen on (default 4318, the OTLP/HTTP port; 0 picks a free one)")
    p.add_argument("--max-body-mb", type=float, default=64.0,
                   help="refuse request bodies larger than this, decompressed, with 413 (default 64)")
    p.add_argument("--settle", type=float, default=2.0,
                   help="seconds a trace whose root has arrived waits for late spans before it is written "
                   "(default 2)")
    p.add_argument("--diagnose-every", type=float, default=5.0, metavar="SECONDS",
                   help="diagnose newly written runs this often while collecting, and once at the end "
                   "(default 5; 0 turns it off)")
    p.set_defaults(func=_collect)
