"""The installed layout: one top-level name, every folder packaged, every source through the sink."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOPS = ("tracer", "loop", "replay", "viewer")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_installed_under_looptrace() -> None:
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {"looptrace." + ".".join(p.parent.relative_to(ROOT).parts)
             for top in TOPS for p in (ROOT / top).rglob("__init__.py")}
    assert found == listed


def test_bare_top_level_names_do_not_resolve_after_install(tmp_path: Path) -> None:
    # From a folder that is not the checkout, as a user's code runs: only looptrace.* is installed.
    code = ("import importlib.util as u; "
            "print([n for n in ('tracer', 'loop', 'replay', 'viewer') if u.find_spec(n)]); "
            "import looptrace.tracer, looptrace.loop, looptrace.replay, looptrace.viewer; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "ok"]


def _imports(path: Path) -> set[str]:
    """Absolute names of what ``path`` imports (relative imports resolved against its package)."""
    rel = path.relative_to(ROOT).with_suffix("")
    package = ["looptrace", *rel.parts[:-1]] if rel.name != "__init__" else ["looptrace", *rel.parts[:-1]]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


SINK_MODULES = ("looptrace.tracer.sink", "looptrace.tracer.sink.sink")
WRITERS = ("looptrace.tracer.store.segments.SegmentWriter", "looptrace.tracer.store.SegmentWriter")
REDACTION = ("looptrace.tracer.sink.redact", "looptrace.tracer.sink.rows")


def _sources() -> list[Path]:
    """Every module that brings data in: the span exporter, OTLP ingest, each file importer."""
    return [ROOT / "tracer/spans/exporter.py", *sorted((ROOT / "tracer/ingest").rglob("*.py"))]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_source_writes_segments_or_redacts_by_itself(path: Path) -> None:
    imported = _imports(path)
    assert not imported & set(WRITERS), f"{path} writes to the store itself; hand records to the Sink"
    assert not {n for n in imported if n.startswith(REDACTION)}, f"{path} redacts by itself; the sink does"


def test_the_sources_that_write_do_so_through_the_sink() -> None:
    writers = [ROOT / "tracer/spans/exporter.py", ROOT / "tracer/ingest/otlp/receiver.py",
               ROOT / "tracer/ingest/files/importing.py"]
    for path in writers:
        assert any(n.startswith(SINK_MODULES) for n in _imports(path)), path


def test_only_the_sink_and_the_store_write_segments() -> None:
    users = sorted(str(p.relative_to(ROOT)) for top in TOPS for p in (ROOT / top).rglob("*.py")
                   if _imports(p) & set(WRITERS) or "SegmentWriter(" in p.read_text())
    # (and segments.py, where it lives; journaled.py is the sink's RowWriter for a durable catalog collect,
    # closing written traces in its local journal file)
    assert users == ["tracer/sink/sink.py", "tracer/store/__init__.py", "tracer/store/iceberg/journaled.py"]


def test_quick_commands_are_the_declared_entry_points() -> None:
    """``looptrace sql`` is loaded without reading package metadata; it must stay the module that
    pyproject.toml declares for it."""
    from looptrace.tracer.cli.main import COMMANDS_GROUP, QUICK_COMMANDS

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][COMMANDS_GROUP]
    assert QUICK_COMMANDS and all(declared[name] == module for name, module in QUICK_COMMANDS.items())
