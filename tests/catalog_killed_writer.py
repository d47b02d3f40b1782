"""A writer killed between two commits of one batch: ``looptrace export --catalog`` as a real process
that SIGKILLs itself right after its append to TABLE is committed, before ``run_records``.

usage: python -m tests.catalog_killed_writer DB CATALOG TABLE
The catalog comes from the environment (``PYICEBERG_CATALOG__<NAME>__*``). Nothing is faked: the
real export runs, with the real ``CatalogStore``; only the moment of the kill is chosen, so the
catalog is left as a crash there leaves it (TABLE and the tables before it committed, the rest not).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from looptrace.tracer.export.catalog import export_catalog
from looptrace.tracer.store.iceberg import CatalogStore


class KilledAfter(CatalogStore):
    def __init__(self, name: str, table: str) -> None:
        super().__init__(name)
        self.kill_after = table

    def _append(self, tbl: Any, data: Any) -> str:
        snapshot = super()._append(tbl, data)
        if tbl.name()[-1] == self.kill_after:
            os.kill(os.getpid(), signal.SIGKILL)  # committed; the batch's later tables never are
        return snapshot


if __name__ == "__main__":
    db, name, table = sys.argv[1:4]
    export_catalog(db, KilledAfter(name, table))
    sys.exit("the writer was not killed: TABLE was never appended to")
