"""``xdist_group`` marks, honoured again under pytest 9 (issue 39).

pytest-xdist 3.8's ``--dist loadgroup`` learns a test's group from an ``@NAME`` suffix that its worker
hook writes into ``item._nodeid``. pytest 9 keeps a node's id in ``item._id``: the suffix never reached
the controller, and every mark was silently ignored. The grouped modules were split between the
workers, and their shared set-ups were built on both (the corpus import, the Ray cluster, the
scale-path chain: 12 s to 50 s each).

Here each worker writes the groups of the tests it collected (node id -> group name, from the same
marks) into a folder the controller named, and the controller's scheduler reads them. The marks work
as tests/README.md describes, and no private attribute is written. Where xdist's suffix does arrive (a
later xdist), its own rule still applies. The tests of a module that share a module-scoped fixture
are a group too, without a mark (``groups_of``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

__all__ = ["groups_of", "write_groups"]

KEY = "looptrace_xdist_groups"  # in each worker's workerinput: the folder to write to
_FOLDER = pytest.StashKey[Path]()


def _shares_a_module_setup(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture built once per module (or class) for the tests that use it."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the test's fixtures
    if info is None:
        return False
    return any(d.scope in ("module", "class") for name in getattr(item, "fixturenames", ())
               for d in info.name2fixturedefs.get(name, ()))


def groups_of(items: Sequence[pytest.Item]) -> dict[str, str]:
    """Node id -> group: the ``xdist_group`` mark's name (names joined as xdist joins them); else, for
    a test that uses a module- or class-scoped fixture, its module. A module's set-up is then built
    once, on one worker, instead of on each worker that got one of its tests (the Codex and Gemini
    CLI sessions, the AG2 chats, the demo stores of test_replay and test_demo: 2 to 15 s each)."""
    out = {}
    for item in items:
        names = {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                 for m in item.iter_markers("xdist_group")}
        if names:
            out[item.nodeid] = "_".join(sorted(names))
        elif _shares_a_module_setup(item):
            out[item.nodeid] = "module:" + item.nodeid.split("::", 1)[0]
    return out


def write_groups(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """In a worker started by this controller: write the groups of ``items`` for the scheduler."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None or KEY not in workerinput:
        return
    folder = Path(workerinput[KEY])
    part = folder / f"{workerinput['workerid']}.json.part"
    part.write_text(json.dumps(groups_of(items)))
    part.replace(folder / f"{workerinput['workerid']}.json")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller: tell each worker where to write its groups (one folder for the session)."""
    config = node.config
    if _FOLDER not in config.stash:
        config.stash[_FOLDER] = Path(tempfile.mkdtemp(prefix="looptrace-xdist-groups-"))
    node.workerinput[KEY] = str(config.stash[_FOLDER])


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup" or _FOLDER not in config.stash:
        return None
    from xdist.scheduler import LoadGroupScheduling

    folder = config.stash[_FOLDER]

    class MarkedGroups(LoadGroupScheduling):
        """xdist's loadgroup scheduling, the group read from what the workers wrote."""

        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                # Called once every worker has collected (each wrote its file before saying so); the
                # collections are the same on every worker (xdist refuses to run otherwise).
                written = sorted(folder.glob("*.json"))
                self._groups = json.loads(written[0].read_text()) if written else {}
            group = self._groups.get(nodeid)
            return group if group is not None else super()._split_scope(nodeid)

    return MarkedGroups(config, log)
