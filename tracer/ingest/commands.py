"""``looptrace collect``: an OTLP/HTTP and OTLP/gRPC receiver writing into a store until Ctrl-C.

On a terminal it keeps one status line up to date (traces, runs and spans received and written), so a
user sees that the exporters reach it; in a pipe or a log it prints only its start and its summary.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from ..cli.main import add_command
from ..cli.numbers import port_or_off, positive, seconds, whole
from ..cli.plural import count
from ..store import DEFAULT_DB
from ..store.backend import add_catalog_option, catalog_name, store_target

if TYPE_CHECKING:
    from .otlp.buffer import ReceiverStats
    from .otlp.receiver import OtlpReceiver

__all__ = ["register", "status_line"]

_GRPC_DEFAULT = 4317
_GC_YOUNG = 20_000  # objects allocated between collections of the young generation (default 700)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_POLL = 0.2  # seconds between looks at the stop flag (a signal taken by another thread wakes no one)


@contextmanager
def _stop_on_signals() -> Iterator[list[int]]:
    """SIGINT and SIGTERM from the very start ask for a stop (the signal is appended to the list)
    instead of raising wherever the main thread happens to be. A KeyboardInterrupt raised between
    ``start()`` (which takes back the journal's open traces) and the ``try`` that stops the receiver
    left those traces unwritten: the cause of the kill test's 4 open traces (issue 24). A flag, not an
    Event: a handler that sets an Event can deadlock on the lock the interrupted ``wait`` holds."""
    asked: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        asked.append(signum)

    previous = {sig: signal.signal(sig, handler) for sig in _STOP_SIGNALS}
    try:
        yield asked
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


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


def status_line(s: ReceiverStats, open_spans: int) -> str:
    """The live line: what came in, and what is stored as runs or still held open."""
    return (f"received {count(s.spans_received, 'span')}; written {count(s.traces_written, 'trace')}, "
            f"{count(s.runs_written, 'run')}, {count(s.spans_written, 'span')}; {open_spans} open; "
            f"{s.rejected} refused")


def _show_status(receiver: OtlpReceiver, stop: threading.Event, every: float = 0.5) -> None:
    shown = ""
    while not stop.wait(every):
        line = status_line(receiver.stats, receiver.unwritten_spans)
        if line != shown:
            shown = line
            sys.stderr.write(f"\r\x1b[K{line}")
            sys.stderr.flush()
    if shown:
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


def _start(args: argparse.Namespace) -> OtlpReceiver | None:
    from .otlp.grpc_service import PortTaken
    from .otlp.receiver import OtlpReceiver

    # The default gRPC port taken (by another collect?) is no reason to refuse HTTP: serve HTTP alone.
    tries = [args.grpc_port, None] if args.grpc_port == _GRPC_DEFAULT and args.port is not None else [args.grpc_port]
    journal = _journal(args)
    for grpc_port in tries:
        receiver = OtlpReceiver(args.db, host=args.host, port=args.port, grpc_port=grpc_port, settle=args.settle,
                                idle_timeout=args.idle_timeout or None,
                                max_body=int(args.max_body_mb * (1 << 20)), alerts=_alerts(args), **journal)
        try:
            return receiver.start()
        except PortTaken as exc:
            if grpc_port is tries[-1]:
                print(f"error: {exc}", file=sys.stderr)
                return None
        except OSError as exc:
            print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
            return None
    return None


def _alerts(args: argparse.Namespace) -> Any:
    """``--alert`` / ``--alert-url``: the rules on runs still going (otlp/alerts.py), or None."""
    if not (args.alert or args.alert_url):
        return None
    from dataclasses import replace

    from ..rules import DEFAULT_THRESHOLDS
    from .otlp.alerts import Alerts

    t = DEFAULT_THRESHOLDS
    if args.alert_repeats is not None:
        t = replace(t, repeat_min=args.alert_repeats, fail_repeat_min=args.alert_repeats)
    return Alerts(args.alert, args.alert_url, thresholds=t, max_usd=args.alert_max_usd, timeout=args.alert_timeout)


def _journal(args: argparse.Namespace) -> dict[str, Any]:
    """For a catalog: the journal in a local DuckDB file (an Iceberg catalog, partitioned by run, does
    not hold a journal keyed by trace), and the writer that closes traces there (store/iceberg/journaled.py)."""
    name = catalog_name(args.db)
    if name is None:
        return {}
    from ..store.iceberg import CatalogStore
    from ..store.iceberg.journaled import JournaledCatalogWriter, journal_path
    from .otlp.journal import open_traces

    journal = args.journal or journal_path(name, args.port if args.port is not None else args.grpc_port)
    writer = JournaledCatalogWriter(CatalogStore(name), journal, retaken=open_traces(os.fspath(journal)),
                                    still_open=lambda: open_traces(os.fspath(journal), strict=True))
    return {"journal_db": journal, "writer": writer}


def _announce(args: argparse.Namespace, receiver: OtlpReceiver) -> None:
    if receiver.stats.recovered_spans:
        print(f"looptrace collect: {count(receiver.stats.recovered_spans, 'span')} of open traces taken back "
              "from the journal (a collect before this one stopped without writing them)", flush=True)
    if receiver.stats.recovered_logs:
        print(f"looptrace collect: {count(receiver.stats.recovered_logs, 'log record')} of open traces taken "
              "back from the journal", flush=True)
    where = [receiver.url] if args.port is not None else []
    if receiver.serves_grpc:
        where.append(f"{receiver.grpc_url} (gRPC)")
    elif args.grpc_port is not None:
        print(f"warning: the OTLP/gRPC port {args.grpc_port} is taken; serving OTLP/HTTP only "
              "(--grpc-port N to choose another)", file=sys.stderr)
    print(f"looptrace collect: listening on {', '.join(where)}, writing to {args.db} (Ctrl-C to stop)",
          flush=True)


def _collect(args: argparse.Namespace) -> int:
    from ..on_stored import notify_stored
    from ..store import Store, StoreError

    if args.port is None and args.grpc_port is None:
        print("error: --port off and --grpc-port off leave nothing to listen on", file=sys.stderr)
        return 2
    if args.journal and not args.catalog:
        print("error: --journal goes with --catalog (a DuckDB store holds its own journal)", file=sys.stderr)
        return 2
    args.db = store_target(args)  # --catalog NAME: the sink appends to the catalog's Iceberg tables
    # Mapping a trace makes thousands of short-lived dicts; at the default threshold (700) the young
    # generation was collected 2-3 times a request, 6% of collect's CPU per span (bench collect_load).
    # This process is the receiver's own, so it collects less often; memory is bounded as before.
    gc.set_threshold(_GC_YOUNG, *gc.get_threshold()[1:])
    with _stop_on_signals() as asked:
        receiver = _start(args)
        if receiver is None:
            return 1
        stop = threading.Event()
        diagnosing = threading.Thread(target=_diagnose_as_they_land,
                                      args=(receiver, args.db, args.diagnose_every, stop),
                                      name="looptrace-diagnose", daemon=True)
        try:  # from here on the receiver is stopped (its buffered traces written) whatever happens
            _announce(args, receiver)
            if sys.stderr.isatty() and not os.environ.get("CI"):
                threading.Thread(target=_show_status, args=(receiver, stop), name="looptrace-status",
                                 daemon=True).start()
            if args.diagnose_every > 0:
                diagnosing.start()
            while not asked:
                time.sleep(_POLL)
        finally:
            stop.set()
            if diagnosing.is_alive():
                diagnosing.join()
            receiver.stop()
            if receiver.alerts is not None:
                receiver.alerts.close(timeout=receiver.alerts.timeout + 5)
    s = receiver.stats
    if receiver.alerts is not None:
        a = receiver.alerts.stats
        print(f"looptrace collect: {count(a.findings, 'alert')} on runs still going: {a.fired} fired, {a.failed} failed, "
              f"{a.timed_out} timed out, {a.dropped} dropped", flush=True)
    print(f"looptrace collect: {count(s.spans_written, 'span')} written in {count(s.traces_written, 'trace')} "
          f"({s.incomplete_traces} incomplete, {s.late_spans} late, {count(s.duplicate_spans, 'duplicate')} dropped); "
          f"{count(s.requests, 'export request')}, {s.rejected} refused", flush=True)
    if s.logs_received or s.logs_written:
        print(f"looptrace collect: {count(s.logs_written, 'log record')} written ({s.late_logs} late, "
              f"{count(s.duplicate_logs, 'duplicate')} dropped; see the log_records table)", flush=True)
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
        sub, "collect", "Receive OpenTelemetry traces over OTLP/HTTP (protobuf or JSON) and OTLP/gRPC into a "
        "store; spans of the GenAI, OpenInference and OpenLLMetry conventions become runs and steps. Every "
        "span is on disk before it is acknowledged.",
        f"looptrace collect --db {DEFAULT_DB} --port 4318   # then OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
    )
    p.add_argument("--db", default=DEFAULT_DB, help=f"store path (default {DEFAULT_DB})")
    add_catalog_option(p, reads=False)
    p.add_argument("--journal", default=None, metavar="PATH",
                   help="with --catalog: the local DuckDB file holding acknowledged spans of open traces "
                   "(default $XDG_STATE_HOME/looptrace/collect-NAME-PORT.duckdb, one per catalog and port)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=port_or_off, default=4318,
                   help="OTLP/HTTP port (default 4318; 0 picks a free one; off serves no HTTP)")
    p.add_argument("--grpc-port", type=port_or_off, default=_GRPC_DEFAULT,
                   help=f"OTLP/gRPC port (default {_GRPC_DEFAULT}, skipped with a warning if taken; 0 picks a "
                   "free one; off serves no gRPC)")
    p.add_argument("--max-body-mb", type=positive, default=64.0,
                   help="refuse request bodies larger than this, decompressed, with 413 (default 64)")
    p.add_argument("--settle", type=seconds(0), default=2.0,
                   help="seconds a trace whose root has arrived waits for late spans before it is written "
                   "(default 2)")
    p.add_argument("--idle-timeout", type=seconds(1, off=True), default=600.0, metavar="SECONDS",
                   help="write a trace whose root never arrives as incomplete once no span of it has come for "
                   "this long (default 600; 0: only at shutdown). Until then its run shows as running")
    p.add_argument("--diagnose-every", type=seconds(0.1, off=True), default=5.0, metavar="SECONDS",
                   help="diagnose newly written runs this often while collecting, and once at the end "
                   "(default 5; 0 turns it off)")
    p.add_argument("--alert", default=None, metavar="COMMAND",
                   help="run COMMAND (with /bin/sh) once per running run and finding of the stagnation rules "
                   "(docs/guards.md): the finding as JSON on stdin and in LOOPTRACE_RUN_ID, LOOPTRACE_AGENT, "
                   "LOOPTRACE_RULE, LOOPTRACE_STEPS, LOOPTRACE_TOOL, LOOPTRACE_SPEND_USD, LOOPTRACE_MESSAGE")
    p.add_argument("--alert-url", default=None, metavar="URL", help="POST each finding to URL as JSON")
    p.add_argument("--alert-repeats", type=whole(2), default=None, metavar="N",
                   help="alert on N identical calls (or N same failures) in a row (default: the analyzer's thresholds)")
    p.add_argument("--alert-max-usd", type=positive, default=None, metavar="USD", help="alert when a run's spend reaches USD")
    p.add_argument("--alert-timeout", type=seconds(0.1), default=10.0, metavar="SECONDS",
                   help="kill an alert command (or give up a POST) after this long (default 10)")
    p.set_defaults(func=_collect)
