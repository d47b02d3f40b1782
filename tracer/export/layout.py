"""The Parquet export folder: where each table's files go, and the manifest that says which count.

    DIR/_looptrace.json
    DIR/table=<table>/day=<YYYY-MM-DD>/agent=<agent>/part-<export id>-<n>.parquet
    DIR/table=writer_stats/day=<YYYY-MM-DD>/part-<export id>-<n>.parquet

Every file carries all of its table's columns plus the partition columns (``day``, and ``agent``
where the table has one), so a file copied elsewhere still says where it came from, and a reader
does not need Hive partitioning to get them back. A file counts only once the manifest lists its
export id: an export writes its files first and the manifest last, so a crash mid-export leaves
files nobody reads (``ParquetSource`` skips them; the next export deletes them). See docs/parquet.md.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..store import SCHEMA_VERSION, StoreError
from ..store.segments import fsync

__all__ = [
    "ExportError", "Manifest", "ExportEntry", "MANIFEST", "FORMAT", "FORMAT_VERSION", "PARTITIONS",
    "table_dir", "part_files", "export_id_of", "read_manifest", "write_manifest", "fsync",
]

MANIFEST = "_looptrace.json"
FORMAT = "looptrace-parquet"
FORMAT_VERSION = 1

# Partition keys by table. `day` is the UTC date the row's run started (so a run's rows sit together),
# or the row's own date for rows outside any run; `agent` is the run's agent name.
PARTITIONS: dict[str, tuple[str, ...]] = {
    "run_records": ("day", "agent"),
    "step_records": ("day", "agent"),
    "tool_call_records": ("day", "agent"),
    "llm_call_records": ("day", "agent"),
    "spans": ("day", "agent"),
    "diagnoses": ("day", "agent"),
    "export_drops": ("day", "agent"),
    "writer_stats": ("day",),
}

_PART = re.compile(r"^part-([0-9a-f]{32})-\d+\.parquet$")


class ExportError(StoreError):
    """The export folder cannot be read or written as asked; the message names it and the remedy."""


@dataclass(frozen=True)
class ExportEntry:
    """One export into the folder, as the manifest records it."""

    id: str
    exported_at: str  # ISO 8601, UTC
    high_water: str  # the cut: every run ready before it (and visible then) is in the folder
    since: str | None  # the lower bound this export used, None for everything
    store: str
    runs: int
    rows: dict[str, int] = field(default_factory=dict)


@dataclass
class Manifest:
    schema_version: int = SCHEMA_VERSION
    high_water: str | None = None  # the cut of the latest export, where `--since auto` starts (minus a grace)
    exported_at: str | None = None
    # Exports that wrote rows, oldest first: their files are the folder's content.
    exports: list[ExportEntry] = field(default_factory=list)
    diagnoses_export: str | None = None  # the export whose diagnoses files are the current snapshot
    diagnoses_fingerprint: str | None = None  # of the store's diagnoses then: unchanged, not rewritten

    def committed(self) -> set[str]:
        return {e.id for e in self.exports}

    def readable(self, table: str) -> set[str]:
        """The export ids whose files of ``table`` are current: diagnoses are a snapshot."""
        if table == "diagnoses":
            return {self.diagnoses_export} if self.diagnoses_export else set()
        return self.committed()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "schema_version": self.schema_version,
            "layout": "table=<table>/day=<YYYY-MM-DD>/agent=<agent>/part-<export>-<n>.parquet",
            "partitions": {t: list(keys) for t, keys in PARTITIONS.items()},
            "high_water": self.high_water, "exported_at": self.exported_at,
            "diagnoses_export": self.diagnoses_export, "diagnoses_fingerprint": self.diagnoses_fingerprint,
            "exports": [asdict(e) for e in self.exports],
        }


def table_dir(folder: Path, table: str) -> Path:
    return folder / f"table={table}"


def export_id_of(path: Path) -> str | None:
    m = _PART.match(path.name)
    return m.group(1) if m else None


def part_files(folder: Path, table: str, exports: Iterable[str] | None = None) -> list[Path]:
    """The Parquet files of ``table``, sorted; only those of ``exports`` if given."""
    wanted = set(exports) if exports is not None else None
    out = []
    for root, _dirs, files in os.walk(table_dir(folder, table)):
        for name in files:
            path = Path(root) / name
            ident = export_id_of(path)
            if ident is not None and (wanted is None or ident in wanted):
                out.append(path)
    return sorted(out)


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or None if it has none. Refuses a newer or unreadable one."""
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ExportError(f"{path}: unreadable manifest ({exc}); the folder was not changed.") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ExportError(f"{path}: not a looptrace Parquet manifest; the folder was not changed.")
    version = int(data.get("schema_version") or 0)
    if data.get("format_version", 0) > FORMAT_VERSION or version > SCHEMA_VERSION:
        raise ExportError(
            f"{folder}: written by a newer looptrace (schema version {version}, format version "
            f"{data.get('format_version')}); upgrade looptrace to read it. The folder was not changed."
        )
    return Manifest(
        schema_version=version,
        high_water=data.get("high_water"),
        exported_at=data.get("exported_at"),
        exports=[ExportEntry(**e) for e in data.get("exports", [])],
        diagnoses_export=data.get("diagnoses_export"),
        diagnoses_fingerprint=data.get("diagnoses_fingerprint"),
    )


def write_manifest(folder: Path, manifest: Manifest) -> None:
    """Replace the manifest atomically: this rename is what commits an export."""
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest.to_json(), indent=1) + "\n", encoding="utf-8")
    fsync(tmp)
    os.replace(tmp, folder / MANIFEST)
    fsync(folder)
