"""Start-up: the CLI loads no heavy package before the command that needs it runs.

Timings live in ``make bench`` (bench/cli_startup.py); what can be asserted without a clock is which
modules a fresh process has loaded, and that the lazy package ``__init__``s still export every name.
"""

from __future__ import annotations

import importlib
import json
import subprocess
from pathlib import Path

import pytest

from looptrace.tracer.store import Store

from .conftest import PYTHON, python_env

HEAVY = ("anthropic", "textual", "opentelemetry.sdk", "opentelemetry.exporter", "google.protobuf", "pyarrow",
         "rich", "jsonschema")


def _loaded_after(argv: list[str]) -> list[str]:
    code = (
        "import sys, json, contextlib, io\n"
        "from looptrace.tracer.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({argv!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=python_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_help_loads_no_heavy_package() -> None:
    modules = _loaded_after(["--help"])
    assert _heavy(modules) == []
    assert "duckdb" not in modules  # --help reads no store


def test_sql_leaves_duckdb_to_its_child(tmp_path: Path) -> None:
    """The query runs in a child that opens the store (``query/child.py``): the command itself needs
    neither DuckDB nor the package metadata that finds plug-in commands."""
    db = tmp_path / "s.duckdb"
    Store(db).compact()
    code = (
        "import sys, json, contextlib, io\n"
        "from looptrace.tracer.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    code = main(['sql', '--db', {str(db)!r}, 'SELECT 41 + 1 AS answer', '--format', 'csv'])\n"
        "print(json.dumps([code, out.getvalue(), sorted(sys.modules)]))\n"
    )
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=python_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    code_, printed, modules = json.loads(done.stdout.splitlines()[-1])
    assert (code_, printed.split()) == (0, ["answer", "42"])
    assert "duckdb" not in modules and "importlib.metadata" not in modules
    assert _heavy(modules) == []
    # Printing needs clean_text only: not the records batch (dataclasses, inspect) nor orjson.
    assert not {"looptrace.tracer.records.batch", "orjson"} & set(modules)


def test_sql_child_opens_a_store_file_on_the_files_own_views(tmp_path: Path) -> None:
    """The query child opens a store file without the export and catalog modules, and with nothing
    pending reads the file's own views (``USE store``) instead of creating its own: the answer is the
    same, the start-up shorter (``make bench`` cli_startup)."""
    db = tmp_path / "s.duckdb"
    Store(db).compact()
    code = (
        "import io, json, pickle, sys\n"
        "from looptrace.tracer.query.child import Request, serve\n"
        "out = io.BytesIO()\n"
        f"serve(Request({str(db)!r}, 'SELECT current_database(), count(*) FROM runs', None, 30.0, 1 << 30,"
        f" {str(tmp_path)!r}), out)\n"
        "kind, result = pickle.loads(out.getvalue()[1:])\n"
        "print(json.dumps([kind, [list(r) for r in result.rows], sorted(sys.modules)]))\n"
    )
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, env=python_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    kind, rows, modules = json.loads(done.stdout.splitlines()[-1])
    assert (kind, rows) == ("ok", [["store", 0]])
    not_needed = ("looptrace.tracer.export", "looptrace.tracer.store.iceberg")
    assert not [m for m in modules if m.startswith(not_needed)]


@pytest.mark.parametrize("package", [
    "looptrace.tracer", "looptrace.tracer.store", "looptrace.tracer.spans", "looptrace.tracer.export",
    "looptrace.tracer.query", "looptrace.tracer.records", "looptrace.tracer.ingest.files", "looptrace.loop",
    "looptrace.replay",
    "looptrace.replay.analyzer",
])
def test_lazy_packages_export_every_name(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


def test_from_import_of_a_lazy_name_is_the_defining_object() -> None:
    from looptrace.tracer import Tracing
    from looptrace.tracer.spans.tracing import Tracing as defined

    assert Tracing is defined


def test_a_command_named_like_its_entry_point_loads_only_that_module(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    Store(db).compact()
    modules = _loaded_after(["sql", "--db", str(db), "SELECT 1"])
    assert "looptrace.tracer.query.commands" in modules
    assert not {"looptrace.loop.commands", "looptrace.viewer.commands", "looptrace.replay.analyze_command"} & set(
        modules)
    # demo is registered by the `loop` entry point: found through the full parser.
    assert "looptrace.loop.commands" in _loaded_after(["demo", "--help"])
