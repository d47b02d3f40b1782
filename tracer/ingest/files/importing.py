"""Importing files and folders of trajectories into a store.

Every file is parsed whole into ``Trajectory`` values before anything is written, so a damaged file
is skipped with a reason and never half-imported. A JSONL file of one run a line (of any size) is
instead checked whole line by line first, then read again and written ``STREAM_CHUNK`` runs at a
time (``formats.stream_file``), so memory stays bounded. Parsed files are handed to the sink (which redacts
them) ``BATCH_FILES`` at a time, each batch one segment, seen whole or not at all; when a batch
fails, its files are written one by one so one bad file cannot sink the rest. Only an unusable store
(``StoreError``) stops an import. OTLP JSON files hold spans rather than trajectories: each is mapped
and written at once as one segment, as ``looptrace collect`` writes (``otlp_json.py``). OTLP JSON log
files are read first, and their records joined to the spans of the trace files beside them
(``otlp_logs.py``); records of no trace in the import are kept as they came.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from datetime import datetime, timezone
from typing import Any

from ...sink import Sink
from ...store import Store, StoreError
from ...store.backend import catalog_target
from ...store.iceberg.catalog import CatalogStore
from . import otlp_json, otlp_logs, sdk_spans, span_exports
from .detect import read_document
from .formats import TrajectoryFormatError, is_candidate, stream_file
from .trajectory import Trajectory, trajectory_rows
from ..otlp.events import log_rows

__all__ = ["BATCH_FILES", "ImportReport", "Progress", "collect_files", "import_paths", "write_trajectories"]

BATCH_FILES = 50

NOT_A_TRAJECTORY = "not a trajectory file"
PRESENT_RUNS = "SELECT DISTINCT run_id FROM run_records"
STORED_SPANS = "SELECT trace_id, span_id, run_id FROM spans WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))"
STORED_LOGS = "SELECT log_id FROM log_records WHERE log_id IN (SELECT unnest(?::VARCHAR[]))"


@dataclass
class ImportReport:
    files_seen: int = 0
    runs_imported: int = 0
    runs_present: int = 0  # already in the store: skipped as duplicates
    steps_imported: int = 0
    runs_without_steps: int = 0  # imported, but nothing in them maps to a step: warned about, never silent
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    by_format: dict[str, int] = field(default_factory=dict)  # runs found per format, imported or present
    files_done: int = 0  # files read to the end (all of them, unless interrupted)
    interrupted: bool = False  # Ctrl-C: what was read before it is stored, the rest was not read
    log_records_imported: int = 0  # from OTLP JSON log files: joined to their spans, or kept as they came

    @property
    def ok(self) -> bool:
        """Something was imported, or everything importable was already there."""
        return self.runs_imported + self.runs_present > 0


# Called after each file with (files done, files in all, the report so far).
Progress = Callable[[int, int, ImportReport], None]


def collect_files(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[tuple[str, str]]]:
    """Every file under ``paths`` (folders recursively, symlinked folders not followed), absolute and
    without repeats, in a stable order; and the paths that do not exist, or that a folder holds but are
    no regular file (a named pipe would block the import forever on its first read; a path given by
    name is read whatever it is)."""
    files: dict[Path, None] = {}
    missing: list[tuple[str, str]] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for folder, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names):
                    found = Path(folder, name)
                    if found.exists() and not found.is_file():
                        missing.append((str(found.resolve()), "not a regular file (a pipe, socket or device)"))
                        continue
                    files.setdefault(found.resolve(), None)
        elif path.exists():
            files.setdefault(path.resolve(), None)
        else:
            missing.append((str(path), "no such file or folder"))
    return list(files), missing


def _parse(path: Path) -> tuple[str, Iterator[list[Trajectory]] | otlp_json.OtlpFile] | str:
    """(format, runs in chunks or a span file's spans by trace), or the reason the file is skipped."""
    is_otlp = otlp_json.sniff(path)
    is_parquet = path.name.lower().endswith(".parquet")
    if not (is_otlp or is_parquet or is_candidate(path)):
        return NOT_A_TRAJECTORY
    try:
        if is_otlp:
            return otlp_json.FORMAT, otlp_json.parse(path)
        if is_parquet:
            return "phoenix-spans", _spans_file(path, span_exports.read_parquet(path))
        if sdk_spans.sniff(path):  # the SDK's own span JSON (ConsoleSpanExporter, ReadableSpan.to_json)
            return sdk_spans.FORMAT, _spans_file(path, sdk_spans.parse(path))
        try:
            return stream_file(path)
        except TrajectoryFormatError as exc:
            if not str(exc).startswith("unknown format"):
                raise
            data = read_document(path)  # exported spans (span trees, Phoenix, Jaeger, Zipkin), or really unknown
            kind = span_exports.sniff_document(data)
            if kind is None:
                raise
            return kind, _spans_file(path, span_exports.decode_document(data))
    except TrajectoryFormatError as exc:
        return str(exc)
    except RecursionError:
        return "nested too deeply to read"
    except Exception as exc:  # noqa: BLE001 - whatever a strange file does, the import goes on
        return f"could not be parsed ({type(exc).__name__}: {exc})"


def _spans_file(path: Path, spans: list[otlp_json.PlainSpan]) -> otlp_json.OtlpFile:
    """Decoded spans by trace, mapped from here on exactly as an OTLP JSON file's."""
    out = otlp_json.OtlpFile(str(path))
    for s in spans:
        if s.trace_id and s.span_id:
            out.traces.setdefault(s.trace_id, []).append(s)
    if not out.traces:
        raise TrajectoryFormatError("no spans with a trace id and a span id")
    return out


class _Writer:
    """Writes parsed files in batches and keeps the counts exact.

    The runs already stored are looked up once, by run id (a hash of the content, so the same
    content under another path is found too), at the first write: a store is never created for
    files that all fail. Importing the same content twice adds nothing.
    """

    def __init__(self, store: Store | CatalogStore, report: ImportReport, sink: Sink) -> None:
        self.store, self.report, self.sink = store, report, sink
        self.batch: list[tuple[Path, list[Trajectory]]] = []
        self.present: set[str] = set()
        self._loaded = False

    def _look_up(self, runs: list[Trajectory]) -> None:
        # Once per import: every stored run id (a few MB for 100k runs), then our own writes are
        # added as they go. One reader session, not one per batch: opening one absorbs segments.
        if self._loaded or not runs:
            return
        self._loaded = True
        if _has_rows(self.store):
            with self.store.reader(locked_down=False) as conn:
                self.present.update(r[0] for r in conn.execute(PRESENT_RUNS).fetchall())

    def add(self, path: Path, runs: list[Trajectory]) -> None:
        self.batch.append((path, runs))
        if len(self.batch) >= BATCH_FILES:
            self.flush()

    def flush(self) -> None:
        # The batch is let go only once written: a Ctrl-C during the write leaves it to the caller, which
        # writes the files it counted as read (``import_paths``). Cleared first, a batch interrupted in
        # its write was counted as kept and never stored (seen under load in test_import_interrupted).
        batch = self.batch
        if not batch:
            return
        runs = [t for _, ts in batch for t in ts]
        self._look_up(runs)
        if not any(t.run_id not in self.present for t in runs):
            self.report.runs_present += len(runs)
            self.batch = []
            return
        try:
            self._write(runs)
        except StoreError:
            raise
        except Exception:  # noqa: BLE001 - retried file by file below, where the culprit is named
            for path, ts in batch:
                try:
                    self._write(ts)
                except StoreError:
                    raise
                except Exception as exc:  # noqa: BLE001 - one unstorable file must not stop the import
                    reason = f"could not be stored ({type(exc).__name__}: {exc})"
                    self.report.skipped.append((str(path), reason))
        self.batch = []

    def add_spans(self, path: Path, parsed: otlp_json.OtlpFile, fmt: str = otlp_json.FORMAT) -> None:
        """An OTLP file is written at once, as ``looptrace collect`` writes: one segment of mapped rows."""
        stored: dict[str, dict[str, str | None]] = {}
        stored_logs: set[str] = set()
        try:
            if _has_rows(self.store):
                with self.store.reader(locked_down=False) as conn:
                    rows = conn.execute(STORED_SPANS, [parsed.trace_ids]).fetchall()
                    if parsed.logs:
                        ids = [r.log_id for logs in parsed.logs.values() for r in logs]
                        stored_logs = {i for (i,) in conn.execute(STORED_LOGS, [ids]).fetchall()}
                for trace_id, span_id, run_id in rows:
                    stored.setdefault(trace_id, {})[span_id] = run_id
            result = parsed.rows(stored, stored_logs)
            self.sink.write(result.rows)
            self.report.log_records_imported += len(result.rows.get("log_records", ()))
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - one unstorable file must not stop the import
            self.report.skipped.append((str(path), f"could not be stored ({type(exc).__name__}: {exc})"))
            return
        self.report.runs_imported += result.runs_new
        self.report.runs_present += result.runs_present
        self.report.steps_imported += result.steps_new
        self.report.runs_without_steps += result.runs_without_steps
        self.report.by_format[fmt] = self.report.by_format.get(fmt, 0) + result.runs_new + result.runs_present

    def add_logs(self, paths: Sequence[Path], logs: list[otlp_logs.PlainLog]) -> None:
        """Records of no trace in the import: kept in ``log_records`` as they came (new ones only)."""
        if not logs:
            return
        try:
            stored: set[str] = set()
            if _has_rows(self.store):
                with self.store.reader(locked_down=False) as conn:
                    stored = {i for (i,) in conn.execute(STORED_LOGS, [[r.log_id for r in logs]]).fetchall()}
            rows = log_rows([r for r in logs if r.log_id not in stored], {}, {})
            self.sink.write({"log_records": rows})
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - one unstorable file must not stop the import
            for path in paths:
                self.report.skipped.append((str(path), f"could not be stored ({type(exc).__name__}: {exc})"))
            return
        self.report.log_records_imported += len(rows)

    def _write(self, runs: list[Trajectory]) -> None:
        fresh = {t.run_id: t for t in runs if t.run_id not in self.present}
        self.sink.write(_rows(fresh.values()))
        self.report.runs_imported += len(fresh)
        self.report.runs_present += len(runs) - len(fresh)
        self.report.steps_imported += sum(len({s.step for s in t.steps}) for t in fresh.values())
        self.report.runs_without_steps += sum(1 for t in fresh.values() if not t.steps)
        self.present.update(fresh)


def _has_rows(store: Store | CatalogStore) -> bool:
    """Whether there is anything to look runs up in yet (never creates a store to find out)."""
    if isinstance(store, Store):
        return store.path.exists() or store.segments_dir.exists()
    return store.table("run_records") is not None


def _rows(trajectories: Iterable[Trajectory]) -> dict[str, list[dict[str, Any]]]:
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    tables: dict[str, list[dict[str, Any]]] = {}
    for t in trajectories:
        for table, rows in trajectory_rows(t, imported_at=now).items():
            tables.setdefault(table, []).extend(rows)
    return tables


def _add_runs(writer: _Writer, path: Path, fmt: str, chunks: Iterator[list[Trajectory]]) -> None:
    """A parsed file's runs to the writer; a streamed file's chunks are written as they come."""
    report = writer.report
    try:
        for i, runs in enumerate(chunks):
            if i == 1:
                writer.flush()
            report.by_format[fmt] = report.by_format.get(fmt, 0) + len(runs)
            writer.add(path, runs)
            if i >= 1:
                writer.flush()
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001 - checked whole before, so only a file changed under us gets here
        report.skipped.append((str(path), f"changed while it was imported, the rest of it skipped ({exc})"))


def write_trajectories(store: Store, trajectories: Sequence[Trajectory], sink: Sink | None = None) -> tuple[int, int]:
    """Hand each trajectory not already in ``store`` to the sink, all in one segment; return
    (runs written, runs already present)."""
    if not trajectories:
        return 0, 0
    ids = sorted({t.run_id for t in trajectories})
    with store.writer() as conn:
        present = {r[0] for r in conn.execute(
            "SELECT DISTINCT run_id FROM run_records WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ids]
        ).fetchall()}
    fresh = {t.run_id: t for t in trajectories if t.run_id not in present}
    (sink or Sink(store.path)).write(_rows(fresh.values()))
    return len(fresh), len(trajectories) - len(fresh)


def import_paths(
    store: Store | CatalogStore, paths: Sequence[str | os.PathLike[str]], progress: Progress | None = None,
    sink: Sink | None = None,
) -> ImportReport:
    """Import every trajectory file under ``paths`` into ``store``; see the module docstring."""
    files, missing = collect_files(paths)
    report = ImportReport(files_seen=len(files), skipped=list(missing))
    target = catalog_target(store.name) if isinstance(store, CatalogStore) else store.path
    writer = _Writer(store, report, sink or Sink(target))
    log_files = {p for p in files if otlp_logs.sniff(p)}
    records = otlp_logs.LogRecords()
    for path in sorted(log_files):
        try:
            records.add(otlp_logs.parse(path))
        except TrajectoryFormatError as exc:
            report.skipped.append((str(path), str(exc)))
    try:
        for done, path in enumerate(files, 1):
            parsed = NOT_A_TRAJECTORY if path in log_files else _parse(path)
            if path in log_files:
                pass  # read above: its records went with the trace files
            elif isinstance(parsed, str):
                report.skipped.append((str(path), parsed))
            elif isinstance(found := parsed[1], otlp_json.OtlpFile):
                found.logs = {t: records.take(t) for t in found.traces if t in records.by_trace}
                writer.add_spans(path, found, parsed[0])
            else:
                _add_runs(writer, path, parsed[0], found)
            report.files_done = done
            if progress is not None and done < len(files):
                progress(done, len(files), report)
    except KeyboardInterrupt:
        # Ctrl-C: the files read so far are written (their batch is in memory, a moment's work) and
        # counted, so the caller can say what was kept; a second Ctrl-C stops that too.
        report.interrupted = True
        finished = set(files[:report.files_done])  # a file cut short is read again by the next import
        writer.batch = [(p, runs) for p, runs in writer.batch if p in finished]
        writer.flush()
        return report
    writer.flush()
    writer.add_logs(sorted(log_files), records.left())
    if progress is not None and files:
        progress(len(files), len(files), report)  # the last call sees the final counts
    return report
