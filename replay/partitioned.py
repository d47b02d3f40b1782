"""The analysis of an Iceberg catalog, partition by partition: in this process, or as Ray tasks.

The analyzer is a function of one run's rows, and the catalog keeps all rows of a run in one
partition (``bucket(run_id)``, ``tracer/store/iceberg/layout.py``), so a partition is a unit of work
that needs nothing from any other: no shuffle. ``analyze_partition`` opens a DuckDB session over
one partition's data files, with the same views as any store, and runs today's analyzer on it
(``load_runs`` then ``diagnose``). Without Ray, a loop calls it for each partition; with Ray, one
task per partition calls the very same function, wherever the cluster places it (a laptop's local
Ray, ``ray start`` nodes, KubeRay). Only the engine differs, so the labels cannot. The driver
writes the diagnoses once, in one atomic overwrite of the catalog's ``diagnoses`` table, and
reports each partition as it finishes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from .analyzer.analyze import RunDiagnoses, _write, load_runs
from .analyzer.rules import diagnose
from .analyzer.thresholds import DEFAULT_THRESHOLDS, Thresholds

if TYPE_CHECKING:
    from looptrace.tracer.store.iceberg import CatalogStore

__all__ = ["analyze_partition", "analyze_catalog", "RAY_HINT"]

RAY_HINT = "--ray needs Ray: install the scale extra: pip install 'looptrace[scale]'"
# (partitions done, partitions in all, runs diagnosed in the one just done)
OnPartition = Callable[[int, int, int], None]


def analyze_partition(files: Mapping[str, Sequence[str]], thresholds: Thresholds = DEFAULT_THRESHOLDS,
                      *, threads: int | None = None) -> list[RunDiagnoses]:
    """Diagnose every run whose rows are in ``files`` (table -> local Parquet paths of one partition);
    ``threads`` caps DuckDB's threads (a Ray task holds one CPU: it should not use every core)."""
    from looptrace.tracer.store.iceberg.session import open_session

    conn = open_session(files)
    try:
        if threads is not None:
            conn.execute(f"SET threads = {int(threads)}")
        return [RunDiagnoses(r.run_id, r.status, diagnose(r, thresholds)) for r in load_runs(conn)]
    finally:
        conn.close()


def _connect(address: str) -> None:
    try:
        import ray
    except ImportError:
        from looptrace.tracer.store.iceberg import CatalogError

        raise CatalogError(RAY_HINT) from None
    if not ray.is_initialized():
        # "auto": RAY_ADDRESS, else the cluster `ray start` runs on this machine.
        target = (os.environ.get("RAY_ADDRESS") or "auto") if address == "auto" else address  # set but empty: unset
        try:
            ray.init(address=target, logging_level="WARNING", log_to_driver=False, configure_logging=False)
        except ConnectionError as exc:
            # Ray's own message tells the user to set an `--address` flag, which is Ray's, not ours.
            from looptrace.tracer.store.iceberg import CatalogError

            where = (f"at {target}" if target != "auto" else
                     "(RAY_ADDRESS is not set and no `ray start` cluster runs on this machine)")
            raise CatalogError(f"--ray {address}: no Ray cluster found {where}. Start one with `ray start --head`, "
                               "give its address with --ray ADDRESS or RAY_ADDRESS, or leave --ray out to analyse "
                               "in this process") from exc


def _on_ray(parts: list[Mapping[str, Sequence[str]]], thresholds: Thresholds, address: str,
            on_partition: OnPartition | None) -> list[RunDiagnoses]:
    import ray

    _connect(address)
    task = ray.remote(num_cpus=1, max_retries=2)(analyze_partition)
    pending = [task.remote(files, thresholds, threads=1) for files in parts]
    results: list[RunDiagnoses] = []
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        got = ray.get(done[0])
        results.extend(got)
        if on_partition is not None:
            on_partition(len(parts) - len(pending), len(parts), len(got))
    return results


def analyze_catalog(store: CatalogStore, *, ray: str | None = None, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                    write: bool = True, on_partition: OnPartition | None = None) -> list[RunDiagnoses]:
    """Every run of the catalog, diagnosed per partition (on the Ray cluster at ``ray``, or ``auto``,
    or in this process when None), in run_id order; the diagnoses replace the catalog's earlier ones."""
    parts = [files for _, files in sorted(store.partitions().items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
             if files.get("run_records")]  # the null partition holds spans of no run
    if ray is None:
        results: list[RunDiagnoses] = []
        for i, files in enumerate(parts, start=1):
            got = analyze_partition(files, thresholds)
            results.extend(got)
            if on_partition is not None:
                on_partition(i, len(parts), len(got))
    else:
        results = _on_ray(parts, thresholds, ray, on_partition)
    results.sort(key=lambda r: r.run_id)
    if write and results:
        _write(store, results)
    return results
