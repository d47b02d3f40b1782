"""The partitions of an analysis as Ray tasks: connect, warm the workers, one task per partition, each timed.

A ``looptrace analyze --ray`` is a new Ray job, and Ray gives every job worker processes of its own,
started only when a task of the job asks for one. Each worker then starts Ray's worker side (about
0.5 s of CPU) and imports DuckDB, pyarrow and the analyzer before its first partition: seconds of
wall time on a busy machine. Left to the first task, that start-up begins only after the driver has
opened the catalog and planned the partitions (measured, docs/scale.md). So the
driver connects first (this module imports only Ray: ``analyze`` calls it before its own imports) and
asks each CPU of the cluster at once for a warm-up task that does those imports (``_warm_up``); the
workers start while the driver imports, opens the catalog and plans. The work is the same and still
inside the command the user waits for; it only overlaps instead of queueing. What the driver has
done already, the workers are spared: the store's table types, which the driver described when it
opened the catalog, go to every task (``use_described``) instead of a migration in each worker.
Partitions are submitted largest first: a worker takes the next as it finishes one, so the small
ones fill the tail.

Each task returns its diagnoses with its ``TaskTiming``: worker, the worker process's start, the
task's start and end, its CPU and the worker's CPU so far; the driver adds when it submitted the
task and when it had the result. That is the timeline ``analyze --timeline`` writes and the bench
profiles. Times are each machine's clock: across hosts they are as good as NTP.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not imported here: the command connects before it imports DuckDB, pyarrow or the analyzer
    from looptrace.tracer.store.parquet_views import Described

    from .analyzer.analyze import RunDiagnoses
    from .analyzer.thresholds import Thresholds

    # partitioned.analyze_partition, given by the caller (this module does not import it: no cycle).
    Analyze = Callable[..., list[RunDiagnoses]]

__all__ = ["ANALYSIS_MODULE", "RAY_HINT", "TaskTiming", "connect", "let_go", "run_tasks"]

RAY_HINT = "--ray needs Ray: install the scale extra: pip install 'looptrace[scale]'"
# Where the task's function lives: what a warm-up imports, by name (the driver need not have imported it).
ANALYSIS_MODULE = "looptrace.replay.partitioned"
# The worker processes this driver asked to warm, and when: once per job.
_warming: dict[str, Any] = {}
# A disconnection under way (``let_go``): a new connection waits for it.
_leaving: list[threading.Thread] = []
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskTiming:
    """One task (or warm-up) as it ran: epoch seconds, CPU seconds. ``worker_cpu_s`` is the worker
    process's CPU since it started, at the task's end: its start-up and imports included."""

    worker: str  # host:pid
    worker_started: float  # the worker process's start (0.0 where /proc cannot say)
    started: float
    ended: float
    cpu_s: float
    worker_cpu_s: float
    runs: int = 0
    warm_up: bool = False
    submitted: float = 0.0  # the driver's clock from here on
    received: float = 0.0


def _process_started() -> float:
    """This process's start as an epoch time, from /proc (Linux); 0.0 elsewhere."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: start time in clock ticks since boot
        return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0


def _timing(started: float, cpu: float, runs: int, warm_up: bool = False) -> TaskTiming:
    return TaskTiming(f"{os.uname().nodename}:{os.getpid()}", _process_started(), started, time.time(),
                      time.process_time() - cpu, time.process_time(), runs, warm_up)


def _warm_up(module: str) -> TaskTiming:
    """What a worker needs before its first partition: the imports (the analysis module, the analyzer
    with it, DuckDB and pyarrow) and DuckDB's first connection. Not the store's table types: the first
    task takes its driver's (``_partition``)."""
    started, cpu = time.time(), time.process_time()
    import importlib

    import duckdb

    importlib.import_module(module)
    duckdb.connect().close()
    return _timing(started, cpu, 0, warm_up=True)


def _partition(analyze: Analyze, files: Mapping[str, Sequence[str]], thresholds: Thresholds,
               described: Described) -> tuple[list[RunDiagnoses], TaskTiming]:
    """The Ray task: ``analyze`` (``partitioned.analyze_partition`` itself) on one partition, one CPU, timed.
    ``described`` is the store's table types as the driver described them: a worker that took them
    spares the migration that describes them (same looptrace everywhere, docs/scale.md)."""
    started, cpu = time.time(), time.process_time()
    from looptrace.tracer.store.parquet_views import use_described

    use_described(described)
    results = analyze(files, thresholds, threads=1)
    return results, _timing(started, cpu, len(results))


def _largest_first(parts: list[Mapping[str, Sequence[str]]]) -> list[Mapping[str, Sequence[str]]]:
    """The partitions by the size of their data files, largest first. A leased worker takes the next
    task in submission order as it finishes one, so the small ones come last and fill the gaps: the
    workers end closer together (the tail is one small partition, not whichever came last)."""
    def size(files: Mapping[str, Sequence[str]]) -> int:
        total = 0
        for paths in files.values():
            for path in paths:
                try:
                    total += os.path.getsize(path)
                except OSError:  # not visible from the driver: unknown, ordered last
                    pass
        return total

    return sorted(parts, key=size, reverse=True)


def _nothing_answers(address: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers at ``address`` when it is a cluster's ``host:port``, else None (something
    answered, or it is ``auto`` or ``ray://...``, which Ray resolves itself)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return None
    import socket

    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        return f"nothing answers there: {exc.strerror or exc}"
    return None


def connect(address: str, module: str = ANALYSIS_MODULE) -> None:
    """Connect to the cluster at ``address`` (``auto``: RAY_ADDRESS, else the one ``ray start`` runs
    here) and start warming one worker per CPU (importing ``module``, where the task's function
    lives); returns at once. Called again, it does nothing. It imports only Ray, so a command can
    call it first, before its own imports: the workers start the sooner."""
    try:
        import ray
    except ImportError:
        from looptrace.tracer.store.iceberg import CatalogError

        raise CatalogError(RAY_HINT) from None
    while _leaving:
        _leaving.pop().join()
    if not ray.is_initialized():
        # "auto": RAY_ADDRESS, else the cluster `ray start` runs on this machine.
        target = (os.environ.get("RAY_ADDRESS") or "auto") if address == "auto" else address  # set but empty: unset
        # Ray retries an address where nothing answers for minutes (still at it after 120 s here; 20 tries of
        # ~40 s each): ask it once first.
        refused = _nothing_answers(target)
        try:
            if refused is not None:
                raise ConnectionError(refused)
            ray.init(address=target, logging_level="WARNING", log_to_driver=False, configure_logging=False)
        except ConnectionError as exc:
            # Ray's own message tells the user to set an `--address` flag, which is Ray's, not ours.
            from looptrace.tracer.store.iceberg import CatalogError

            where = (f"at {target}" + (f" ({refused})" if refused else "") if target != "auto" else
                     "(RAY_ADDRESS is not set and no `ray start` cluster runs on this machine)")
            raise CatalogError(f"--ray {address}: no Ray cluster found {where}. Start one with `ray start --head`, "
                               "give its address with --ray ADDRESS or RAY_ADDRESS, or leave --ray out to analyse "
                               "in this process") from exc
    job = ray.get_runtime_context().get_job_id()
    if _warming.get("job") == job:
        return
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    warm = ray.remote(num_cpus=1, max_retries=0)(_warm_up)
    submitted = time.time()
    # One per CPU, on its node (soft: a node gone meanwhile sends it elsewhere), so every worker the
    # partitions will use starts now; Ray keeps a job's idle workers for its next tasks.
    refs = [warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=True)).remote(module)
            for node in ray.nodes() if node.get("Alive")
            for _ in range(int(node.get("Resources", {}).get("CPU", 0)))]
    _warming.clear()
    _warming.update(job=job, refs=refs, submitted=submitted)


def let_go() -> None:
    """Disconnect from the cluster in a thread of its own, for a command that is done with it and goes
    on (the diagnoses are written after the analysis). Left to the interpreter's exit, Ray's own
    shutdown took 0.78 s of a 400,000-step command's end (measured: ``looptrace analyze --ray``'s
    last atexit hook, 3 runs), most of it waiting on the cluster; here it overlaps the write. The
    thread is not a daemon: the interpreter joins it before Ray's exit hook, which then has nothing
    left to do, and a new ``connect`` waits for it."""
    import ray

    if not ray.is_initialized():
        return

    def leave() -> None:
        try:
            ray.shutdown()
        except Exception:  # noqa: BLE001 - the analysis is done; a failed disconnect only costs the exit's retry
            log.debug("looptrace: disconnecting from Ray failed", exc_info=True)

    _warming.clear()
    thread = threading.Thread(target=leave, name="looptrace-ray-leave")
    _leaving.append(thread)
    thread.start()


def run_tasks(analyze: Analyze, parts: list[Mapping[str, Sequence[str]]], thresholds: Thresholds, address: str,
              on_partition: Callable[[int, int, int], None] | None) -> tuple[list[RunDiagnoses], dict[str, object]]:
    """``analyze`` as one task per partition on the cluster; the diagnoses, and what ``EngineRun`` reports."""
    import ray

    from looptrace.tracer.store.parquet_views import described_tables

    connect(address, analyze.__module__)
    described = ray.put(described_tables())  # this process described them already: its catalog's session types
    # SPREAD: Ray's default packs tasks onto the driver's node first and leases its worker again and again, so on
    # two one-CPU nodes 16 short partitions split 12/4 (the last worker done 2.8 s after the first at 400,000 steps).
    task = ray.remote(num_cpus=1, max_retries=2, scheduling_strategy="SPREAD")(_partition)
    ordered = _largest_first(parts)
    submitted = time.time()
    pending = {task.remote(analyze, files, thresholds, described): i for i, files in enumerate(ordered)}
    results: list[RunDiagnoses] = []
    timings: list[TaskTiming] = []
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        pending.pop(done[0])
        got, timing = ray.get(done[0])
        timings.append(replace(timing, submitted=submitted, received=time.time()))
        results.extend(got)
        if on_partition is not None:
            on_partition(len(parts) - len(pending), len(parts), len(got))
    warm_ups = _warm_ups()
    alive = [n for n in ray.nodes() if n.get("Alive")]
    last_end: dict[str, float] = {}
    for t in timings:
        last_end[t.worker] = max(last_end.get(t.worker, 0.0), t.ended)
    ends = sorted(last_end.values())
    return results, {
        "address": ray.get_runtime_context().gcs_address, "nodes": len(alive),
        "cpus": float(sum(n.get("Resources", {}).get("CPU", 0.0) for n in alive)),
        "task_cpu_s": sum(t.cpu_s for t in timings), "task_wall_s": sum(t.ended - t.started for t in timings),
        "first_start_s": max(0.0, min((t.started for t in timings), default=submitted) - submitted),
        "workers": len(last_end), "last_gap_s": ends[-1] - ends[0] if ends else 0.0,
        "timeline": tuple(warm_ups + sorted(timings, key=lambda t: t.started))}


def _warm_ups() -> list[TaskTiming]:
    """The warm-ups' timings: done by now, as a partition needed their CPU (one queued behind the
    partitions and not done yet is left out: the analysis does not wait for it)."""
    import ray

    refs, submitted = _warming.get("refs", []), _warming.get("submitted", 0.0)
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
    return [replace(t, submitted=submitted) for t in ray.get(ready)]
