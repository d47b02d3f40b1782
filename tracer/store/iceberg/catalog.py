"""``CatalogStore``: the store's tables in an Iceberg catalog, written and read like a DuckDB store.

It is both sides of the storage seam (``store/backend.py``): ``write(rows)`` is what the sink calls
(one Iceberg append per table), ``reader()`` is a DuckDB session with the documented views, and
``replace_diagnoses`` is the analyzer's one update. The catalog is pyiceberg's, loaded by name from
``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__*`` variables: a SQL catalog (SQLite on one
machine, PostgreSQL for a team) or a REST catalog.

Many writers: an Iceberg commit is one compare-and-swap of the table's metadata pointer in the
catalog, so two appends never overwrite each other; the loser refreshes and commits again
(pyiceberg retries, up to ``COMMIT_RETRIES`` times, set on every table this code creates; SQLite's
own "database is locked" is retried here). Iceberg has no commit across tables, so a batch is
appended table by table with ``run_records`` last, and readers show only rows of runs that
``run_records`` knows (``session.py``): a writer killed between two commits leaves rows no reader
sees, and whoever writes those runs again first removes them (``delete_runs``, ``orphan_runs``), so
nothing is seen twice. The object is picklable (only the catalog's name travels), so a query child
process or a Ray task reopens the catalog itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb

from ..segments import TableData, arrow_schema, to_arrow
from .errors import CatalogError, CatalogUnavailable, created_meanwhile, retrying, retrying_on
from .layout import CATALOG_TABLES, NAMESPACE, identifier, iceberg_schema, missing_columns, partition_spec
from .replace import OWN_RETRIES, replace_runs
from .session import local_path, open_session

# Deleting what may not be there is the point of ``delete_runs`` (a trace written whole or in part by a
# writer that crashed, or not at all): pyiceberg warns each time nothing matched, and that warning
# reached the terminal of every ``collect --catalog``. Set once at import, not per call:
# ``warnings.catch_warnings`` swaps the process's filters, which is not safe under the receiver's threads.
warnings.filterwarnings("ignore", message="Delete operation did not match any records", category=UserWarning)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Table

__all__ = ["CatalogStore", "CatalogError", "CatalogUnavailable", "load_catalog", "EXTRA_HINT", "COMMIT_RETRIES",
           "as_store_arrow", "retrying", "planning_order"]

EXTRA_HINT = "install the scale extra: pip install 'looptrace[scale]'"
COMMIT_RETRIES = 50  # many receivers commit to one table at once; each retry waits up to 2 s
_PROPERTIES = {"commit.retry.num-retries": str(COMMIT_RETRIES), "commit.retry.max-wait-ms": "2000",
               "commit.retry.total-timeout-ms": "600000", "write.parquet.compression-codec": "zstd"}
# Properties a table must have, set on tables an earlier looptrace made too: the diagnoses table's
# commits are planned on the snapshot they read (replace.py), so only this code retries them.
_OWN_PROPERTIES = {"diagnoses": OWN_RETRIES}


def load_catalog(name: str) -> Catalog:
    """The pyiceberg catalog ``name``; a one-line error naming the extra when pyiceberg is missing."""
    try:
        from pyiceberg.catalog import load_catalog as _load
    except ImportError:
        raise CatalogError(f"--catalog needs pyiceberg: {EXTRA_HINT}") from None
    try:
        from pyiceberg.utils.config import Config

        # pyiceberg reads .pyiceberg.yaml and the environment once, at import; read them now, so a
        # long-lived process (a test run, a notebook) sees the configuration as it is when it opens.
        config = Config().get_catalog_config(name) or {}
        # Several writers opening a new PostgreSQL catalog at once race to create pyiceberg's own
        # tables there (a duplicate-key error for the loser): the tables exist then, so open again.
        return retrying(lambda: _load(name, **config), f"opening catalog {name!r}",
                        deadline=10.0, also=created_meanwhile)
    except CatalogUnavailable as exc:
        raise CatalogUnavailable(f"catalog {name!r} cannot be loaded: {exc}") from exc.__cause__
    except ImportError as exc:
        raise CatalogError(f"catalog {name!r} needs a package pyiceberg could not import ({exc}): {EXTRA_HINT}") from None
    except Exception as exc:  # noqa: BLE001 - pyiceberg raises ValueError, NotInstalledError, ...: one message
        raise CatalogError(
            f"catalog {name!r} cannot be loaded ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            f"configure it in .pyiceberg.yaml or with PYICEBERG_CATALOG__{name.upper()}__URI and __WAREHOUSE"
        ) from exc


def as_store_arrow(table: str, rows: TableData | pa.Table) -> pa.Table:
    """Rows as an Arrow table of the store's schema (an Arrow table is cast, its columns put in order)."""
    import pyarrow as pa

    schema = arrow_schema(table)
    if isinstance(rows, pa.Table):
        have = set(rows.schema.names)
        return pa.table({f.name: rows.column(f.name).cast(f.type) if f.name in have
                         else pa.nulls(rows.num_rows, f.type) for f in schema}, schema=schema)
    return to_arrow(rows, schema)


def planning_order(tables: Sequence[str]) -> list[str]:
    """``run_records`` first: a run it lists committed its other rows before, so the snapshots of the
    other tables, taken after, hold them all (the other way round, a run could show without its steps)."""
    return sorted(tables, key=lambda t: t != "run_records")


class CatalogStore:
    """The looptrace tables in the Iceberg catalog ``name`` (namespace ``looptrace``)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._catalog: Catalog | None = None

    def __repr__(self) -> str:
        return f"CatalogStore({self.name!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["name"])  # type: ignore[misc]

    @property
    def path(self) -> str:
        """What messages name the store by (the DuckDB store's attribute of the same name)."""
        return f"catalog {self.name}"

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = load_catalog(self.name)
        return self._catalog

    # -- tables ----------------------------------------------------------------------------------

    def table(self, table: str) -> Table | None:
        """The Iceberg table, or None if nothing has created it yet."""
        catalog = self.catalog  # first: it says which extra is missing, if pyiceberg is
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        try:
            return retrying(lambda: catalog.load_table(identifier(table)), f"loading {table}")
        except (NoSuchTableError, NoSuchNamespaceError):
            return None

    def create_tables(self) -> dict[str, Table]:
        """Every table, created if missing and given the columns later migrations added."""
        retrying(lambda: self.catalog.create_namespace_if_not_exists(NAMESPACE), "creating the namespace")
        return {t: self._ensure(t) for t in CATALOG_TABLES}

    def _ensure(self, table: str) -> Table:
        import pyarrow as pa

        want = arrow_schema(table)

        def create() -> Table:
            schema = iceberg_schema(want)
            properties = {**_PROPERTIES, **_OWN_PROPERTIES.get(table, {})}
            return self.catalog.create_table_if_not_exists(
                identifier(table), schema=schema, partition_spec=partition_spec(schema), properties=properties)

        tbl = retrying(create, f"creating {table}")
        while missing := missing_columns(tbl.schema(), want):
            def evolve(tbl: Table = tbl, missing: list[str] = missing) -> None:
                with tbl.update_schema() as update:
                    update.union_by_name(pa.schema([want.field(name) for name in missing]))
            try:
                retrying_on(tbl, evolve, f"adding columns to {table}")
            except Exception as exc:  # noqa: BLE001 - another writer added them first: look again
                if "already exists" not in str(exc):
                    raise
            tbl = retrying(lambda: self.catalog.load_table(identifier(table)), f"loading {table}")
        own = _OWN_PROPERTIES.get(table, {})
        if any(tbl.properties.get(k) != v for k, v in own.items()):  # a table an earlier looptrace made
            def set_own(tbl: Table = tbl) -> None:
                with tbl.transaction() as tx:
                    tx.set_properties(own)
            retrying_on(tbl, set_own, f"setting the properties of {table}")
        return tbl

    # -- writing (the sink's RowWriter) ----------------------------------------------------------

    def write(self, rows: Mapping[str, TableData | pa.Table], tables: Mapping[str, Table] | None = None) -> str | None:
        """Append one batch, table by table, ``run_records`` last; the last snapshot id, or None if empty.
        ``tables``: what ``create_tables`` returned, when the caller has it already."""
        data = {t: as_store_arrow(t, r) for t, r in rows.items() if t in CATALOG_TABLES}
        data = {t: d for t, d in data.items() if d.num_rows}
        if not data:
            return None
        tables = tables or self.create_tables()
        snapshot = None
        for table in sorted(data, key=lambda t: t == "run_records"):
            snapshot = self._append(tables[table], data[table])
        return snapshot

    def _append(self, tbl: Table, data: pa.Table) -> str:
        def attempt() -> str:
            tbl.append(data)
            current = tbl.current_snapshot()
            return str(current.snapshot_id) if current else ""

        return retrying_on(tbl, attempt, f"appending to {'.'.join(tbl.name())}", idempotent=False)

    def delete_runs(self, run_ids: Sequence[str], trace_ids: Sequence[str] = (),
                    tables: Mapping[str, Table] | None = None) -> None:
        """Remove every row of these runs (and the spans of these traces), ``run_records`` first, so a
        run leaves the readers' sight before its other rows go: what a writer does before writing a
        batch again that may have been written, whole or in part, by one that crashed."""
        from pyiceberg.expressions import In, Or

        ids, traces = sorted(set(run_ids)), sorted(set(trace_ids))
        if not ids and not traces:
            return
        tables = tables or self.create_tables()
        for table in planning_order(CATALOG_TABLES):
            if table == "spans" and traces:
                where = Or(In("run_id", ids), In("trace_id", traces)) if ids else In("trace_id", traces)
            elif ids and "run_id" in tables[table].schema().column_names:
                where = In("run_id", ids)
            else:
                continue
            self._delete(tables[table], where)

    def _delete(self, tbl: Table, where: Any) -> None:
        # Rows not there warn: filtered at import, above.
        retrying_on(tbl, lambda: tbl.delete(delete_filter=where), f"deleting from {'.'.join(tbl.name())}")

    def orphan_runs(self) -> set[str]:
        """Run ids with rows in some table but none in ``run_records``: a batch a writer did not finish
        (crashed between commits), or one being written right now by another writer."""
        listed: set[str] = set()
        seen: set[str] = set()
        for table in planning_order(CATALOG_TABLES):
            tbl = self.table(table)
            if tbl is None or "run_id" not in tbl.schema().column_names:
                continue
            ids = tbl.scan(selected_fields=("run_id",)).to_arrow().column("run_id").unique().to_pylist()
            (listed if table == "run_records" else seen).update(i for i in ids if i is not None)
        return seen - listed

    def replace_diagnoses(self, run_ids: Sequence[str], data: pa.Table) -> None:
        """The analyzer's write: these runs' diagnoses become ``data``, in one atomic overwrite, planned
        on the table as it is and planned again if another writer commits first (replace.py)."""
        retrying(lambda: self.catalog.create_namespace_if_not_exists(NAMESPACE), "creating the namespace")
        tbl = self._ensure("diagnoses")

        retrying_on(tbl, lambda: replace_runs(tbl, run_ids, data), "replacing diagnoses")

    @contextmanager
    def writer(self, **_: object) -> Iterator[duckdb.DuckDBPyConnection]:
        raise CatalogError(f"{self.path}: written through the sink and replace_diagnoses, not a DuckDB connection")
        yield  # pragma: no cover - makes this a generator

    # -- reading ---------------------------------------------------------------------------------

    def files(self, tables: Sequence[str] = CATALOG_TABLES) -> dict[str, list[Any]]:
        """Each existing table's (of ``tables``) scan tasks in its current snapshot (one per data file)."""
        out: dict[str, list[Any]] = {}
        for table in planning_order(tables):
            tbl = self.table(table)
            if tbl is not None:
                out[table] = list(tbl.scan().plan_files())
        if not out:
            raise CatalogError(f"{self.path}: no looptrace tables in namespace {NAMESPACE!r} yet "
                               "(nothing has been collected, imported or exported into it)")
        return out

    def partitions(self) -> dict[int | None, dict[str, list[str]]]:
        """Local data files by partition (bucket of run_id) and table: a partition holds whole runs."""
        out: dict[int | None, dict[str, list[str]]] = {}
        for table, tasks in self.files().items():
            for task in tasks:
                path = local_path(task.file.file_path)
                if path is None or task.delete_files:
                    raise CatalogError(f"{self.path}: {task.file.file_path} is not a plain local data file; "
                                       "analyse by partition with a local warehouse (docs/scale.md)")
                key = task.file.partition[0] if len(task.file.partition) else None
                out.setdefault(key, {}).setdefault(table, []).append(path)
        return out

    def _session_tables(self, only: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
        tables: dict[str, Any] = {}
        folders: set[str] = set()
        for table, tasks in self.files(only).items():
            paths = [local_path(t.file.file_path) for t in tasks]
            if all(p is not None for p in paths) and not any(t.delete_files for t in tasks):
                tables[table] = [p for p in paths if p is not None]
                folders.update(p.rsplit("/", 1)[0] for p in tables[table])  # type: ignore[union-attr]
            else:  # an object store or delete files: read through pyiceberg
                tbl = self.table(table)
                tables[table] = tbl.scan().to_arrow() if tbl is not None else []
        return tables, sorted(folders)

    @contextmanager
    def reader(self, *, locked_down: bool = True, memory_limit: str = "2GB", scratch: str | None = None,
               tables: Sequence[str] = CATALOG_TABLES, **_: object) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only session: the catalog's current snapshot of every table, the documented views.
        ``tables``: only these are read (the others empty), for a question about a few: each table
        read is a load and a scan plan (~0.3 s for all of them over a local SQLite catalog)."""
        from ..store import lockdown

        read, folders = self._session_tables(tables)
        try:
            conn = open_session(read)
        except duckdb.Error as exc:
            raise CatalogError(f"{self.path}: cannot read its tables: {str(exc).splitlines()[0]}") from exc
        try:
            if locked_down:
                quoted = ", ".join("'" + f.replace("'", "''") + "/'" for f in folders)
                conn.execute(f"SET allowed_directories = [{quoted}]")
                lockdown(conn, memory_limit=memory_limit, scratch=scratch)
            yield conn
        finally:
            conn.close()
