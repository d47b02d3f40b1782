"""Messages to the viewer's screens, plain data inside: from thread workers, and from the timeline."""

from __future__ import annotations

from pathlib import Path

from textual.message import Message

from looptrace.tracer.query.sql import QueryResult

from .data import RunDetail, RunPage, RunPair, StepDetail
from .search import SearchPage

__all__ = ["RunsLoaded", "RunLoaded", "ActionsLoaded", "DiffLoaded", "StepLoaded", "QueryDone", "PagerReady",
           "LoadFailed", "StepHighlighted", "StepSelected", "SearchDone", "UsageLoaded", "RunsAnalysed"]


class RunsLoaded(Message):
    def __init__(self, page: RunPage) -> None:
        super().__init__()
        self.page = page


class RunsAnalysed(Message):
    """Runs without a diagnosis were analysed in a worker: ``diagnosed`` of them got one."""

    def __init__(self, diagnosed: int) -> None:
        super().__init__()
        self.diagnosed = diagnosed


class RunLoaded(Message):
    def __init__(self, run_id: str, detail: RunDetail | None) -> None:
        super().__init__()
        self.run_id = run_id
        self.detail = detail


class ActionsLoaded(Message):
    """The original's actions, for finding where a replay or fork diverges."""

    def __init__(self, original: str, actions: list[tuple[int, str | None]]) -> None:
        super().__init__()
        self.original = original
        self.actions = actions


class DiffLoaded(Message):
    """A replay or fork aligned with its original (None: the run has no original)."""

    def __init__(self, run_id: str, pair: RunPair | None) -> None:
        super().__init__()
        self.run_id = run_id
        self.pair = pair


class StepLoaded(Message):
    def __init__(self, run_id: str, step: int, detail: StepDetail | None) -> None:
        super().__init__()
        self.run_id = run_id
        self.step = step
        self.detail = detail


class QueryDone(Message):
    def __init__(self, result: QueryResult) -> None:
        super().__init__()
        self.result = result


class PagerReady(Message):
    """The whole text of a step, written (escaped) to ``path`` for ``$PAGER``."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path


class LoadFailed(Message):
    def __init__(self, what: str, error: str) -> None:
        super().__init__()
        self.what = what
        self.error = error


class StepHighlighted(Message):
    """The timeline's cursor moved onto ``step``."""

    def __init__(self, step: int) -> None:
        super().__init__()
        self.step = step


class StepSelected(Message):
    """Enter (or a click) on the timeline's ``step``: open it. ``run_id`` when the table shows two runs."""

    def __init__(self, step: int, run_id: str | None = None) -> None:
        super().__init__()
        self.step = step
        self.run_id = run_id


class OpenRun(Message):
    """Open the run screen of ``run_id``. Screens ask the app to navigate, so no screen module imports
    another (the runs list opens a run; a run lists its children)."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id


class OpenChildren(Message):
    """Open the runs list of the runs under ``parent`` (sub-agents, replays, forks)."""

    def __init__(self, parent: str, parent_name: str) -> None:
        super().__init__()
        self.parent = parent
        self.parent_name = parent_name


class SearchDone(Message):
    def __init__(self, page: SearchPage) -> None:
        super().__init__()
        self.page = page


class UsageLoaded(Message):
    def __init__(self, groups: list[tuple[str, QueryResult]]) -> None:
        super().__init__()
        self.groups = groups
