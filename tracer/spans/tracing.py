"""``Tracing``: one TracerProvider wired to the store (and optionally an OTLP endpoint).

The store gets the SDK's batch processor with back-pressure (no silent drops) plus a processor that
records runs as they start; an OTLP endpoint gets the SDK's BatchSpanProcessor, whose bounded queue
drops rather than slowing the agent when the endpoint is slow or dead, counting per run what it
loses into ``export_drops`` (``tracer/export/otlp.py``).
"""

from __future__ import annotations

import atexit
import logging
import os
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from .exporter import DuckDBSpanExporter
from .manual import Run
from .processors import BackpressureSpanProcessor, RunStartProcessor
from .sigterm import exit_on_sigterm
from ..sink.redact import Redactor
from ..store import DEFAULT_DB, Store

__all__ = ["Tracing"]

log = logging.getLogger("looptrace")



def _otlp_endpoint_from_env() -> str | None:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")


def _capture_content_from_env() -> bool:
    """Message content is recorded unless the GenAI conventions' switch says otherwise: replay needs it."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").strip().lower()
    return value not in ("false", "0", "no", "off")


def _weak_call(method: Callable[[], object]) -> Callable[[], None]:
    """``method`` called while its object lives; the hook never keeps it alive."""
    weak = weakref.WeakMethod(method)  # type: ignore[arg-type]

    def call() -> None:
        bound = weak()
        if bound is not None:
            bound()

    return call


class Tracing:
    """Set up tracing into a store. Use ``run()`` to trace an agent run; ``shutdown()`` at the end
    (also done at interpreter exit by the SDK)."""

    def __init__(
        self,
        db: str | os.PathLike[str] | None = DEFAULT_DB,
        *,
        otlp_endpoint: str | None = None,
        service_name: str = "looptrace",
        capture_content: bool | None = None,
        redactor: Redactor | None = None,
        set_global: bool = False,
        handle_sigterm: bool = True,
        durable: bool = True,
        schedule_delay_millis: float = 500,
    ) -> None:
        self.db = os.fspath(db) if db is not None else None
        self.capture_content = _capture_content_from_env() if capture_content is None else capture_content
        self.redactor = redactor if redactor is not None else Redactor()
        self.provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
        # Registered after the provider's own exit hook, so run before it (atexit is last in, first out).
        self._closers: list[Callable[[], None]] = []
        atexit.register(_weak_call(self._run_closers))
        self.exporter: DuckDBSpanExporter | None = None
        self._processor: BackpressureSpanProcessor | None = None
        if self.db is not None:
            self.exporter = DuckDBSpanExporter(self.db, durable=durable, redactor=self.redactor)
            self.provider.add_span_processor(RunStartProcessor(self.exporter))
            self._processor = BackpressureSpanProcessor(self.exporter, schedule_delay_millis=schedule_delay_millis)
            self.provider.add_span_processor(self._processor)
        endpoint = otlp_endpoint or _otlp_endpoint_from_env()
        if endpoint:
            from .otlp import otlp_processor

            self.provider.add_span_processor(otlp_processor(endpoint, store=self.exporter, redactor=self.redactor))
        if set_global:
            trace.set_tracer_provider(self.provider)
        self.tracer = self.provider.get_tracer("looptrace")
        self._closed = False
        self._pid = os.getpid()
        if handle_sigterm:
            exit_on_sigterm()  # not in multiprocessing children: see sigterm.py
        # A forked child that leaves by os._exit skips every exit hook: the processor exports each of
        # its runs as the run ends (BackpressureSpanProcessor._after_fork), and multiprocessing's
        # children also flush through its own exit hooks.
        self._watch_multiprocessing()

    def _watch_multiprocessing(self) -> None:
        import multiprocessing
        import multiprocessing.util

        # Forked multiprocessing children (Process, Pool, ProcessPoolExecutor) run this after start-up.
        multiprocessing.util.register_after_fork(self, Tracing._flush_at_child_exit)
        if multiprocessing.parent_process() is not None:  # made inside a spawn or forkserver child
            self._flush_at_child_exit()
            if self._processor is not None:
                self._processor.export_each_run()

    def _flush_at_child_exit(self) -> None:
        """In a ``multiprocessing`` child, flush through multiprocessing's own exit hooks, which its
        children run before they leave by ``os._exit`` (atexit never runs there). Registered after
        ``multiprocessing`` has cleared the finalizers it inherited, or the hook would be wiped before
        it runs (3 processes and 4 pool tasks, 42 steps: 0 stored)."""
        if not self._closed:
            import multiprocessing.util

            multiprocessing.util.Finalize(None, _weak_call(self.flush), exitpriority=100)

    def run(self, agent: str, **kwargs: Any) -> Run:
        """Start a run (``invoke_agent {agent}`` span); see ``Run`` for the arguments."""
        kwargs.setdefault("capture_content", self.capture_content)
        # Request identity is computed on the request as the sink will store it (records/requests.py).
        # ``value_or_same``: a message with nothing to redact comes back as itself, uncopied and
        # hashed once (most messages; the agent's thread pays for this on every call).
        kwargs.setdefault("redact", self.redactor.value_or_same if self.redactor.enabled else None)
        return Run(self.tracer, agent, **kwargs)

    def on_close(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` before the provider shuts down (``shutdown()`` or interpreter exit): spans an
        instrumentor still holds open (tool calls awaiting a result) end while they can be stored."""
        self._closers.append(hook)

    def _run_closers(self) -> None:
        for hook in list(self._closers):
            try:
                hook()
            except Exception:  # noqa: BLE001 - telemetry never breaks the agent, even at exit
                log.debug("looptrace: a close hook failed", exc_info=True)

    def flush(self) -> bool:
        return self.provider.force_flush()

    def shutdown(self, *, compact: bool = True) -> None:
        """Flush and close; then, if the store is free, absorb this process's segments into it."""
        if self._closed:
            return
        self._closed = True
        self._run_closers()
        self.provider.shutdown()
        # After write errors the disk is likely still failing; and DuckDB is not fork-safe: a forked
        # child's copy holds the parent's open databases and their locks (a compaction there was refused,
        # or aborted the child in DuckDB's C++). Either way the segments are left to a later reader.
        forked = os.getpid() != self._pid
        if compact and self.db is not None and not forked and not (self.exporter and self.exporter.write_errors):
            try:
                Store(self.db).try_compact()
            except Exception as exc:  # noqa: BLE001 - the segments stay; a later reader absorbs them
                log.warning("looptrace: could not compact %s: %s", self.db, exc)

    def __enter__(self) -> Tracing:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.shutdown()
