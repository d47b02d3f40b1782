"""A SQL editor over the store, through the same locked-down path as ``looptrace sql``.

One read-only statement per run, on a session that cannot touch files, load extensions or change
settings (``Store.reader(locked_down=True)`` + ``tracer.sql.execute``), at most ``SQL_ROW_LIMIT``
rows, run in a child process stopped after ``SQL_TIMEOUT`` seconds or past ``SQL_MEMORY_GB`` (so a
stopped query never takes the viewer with it). Errors are shown where the results would be.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static, TextArea

from looptrace.tracer.query.sql import QueryResult
from looptrace.tracer.store import Store

from ..data import SQL_MEMORY_GB, SQL_ROW_LIMIT, SQL_TIMEOUT, run_sql
from ..messages import LoadFailed, QueryDone
from ..safe import safe
from ..widgets import KeysFooter, ResultsTable, TitleBar
from .base import ViewerScreen

__all__ = ["SqlScreen", "EXAMPLES"]

# The names are the F-keys' labels in the footer: short, so that every key fits at 80 columns.
EXAMPLES: tuple[tuple[str, str], ...] = (
    ("by status", "SELECT status, count(*) AS runs, sum(n_steps) AS steps,\n"
                       "       round(sum(cost_usd), 4) AS cost_usd\n"
                       "FROM runs GROUP BY status ORDER BY runs DESC, status"),
    ("failed calls", "SELECT run_id, step, tool, error_type, left(observation, 80) AS observation\n"
                          "FROM steps WHERE is_error ORDER BY run_id, step"),
    ("diagnoses", "SELECT r.agent, d.label, d.first_step, d.last_step, d.explanation\n"
                  "FROM diagnoses d JOIN runs r USING (run_id) WHERE d.is_primary ORDER BY d.label"),
    ("contexts", "SELECT run_id, step, context_tokens, observation_bytes\n"
                         "FROM steps WHERE context_tokens IS NOT NULL ORDER BY context_tokens DESC LIMIT 20"),
)


class SqlScreen(ViewerScreen):
    NAME = "sql"
    LOADS_ON_MOUNT = False
    HELP = (
        "One read-only statement (SELECT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN) over the views runs,\n"
        "steps, tool_calls, llm_calls, diagnoses, spans, exactly as `looptrace sql` runs it:\n"
        f"at most {SQL_ROW_LIMIT:,} rows, stopped after {SQL_TIMEOUT:g} s or past {SQL_MEMORY_GB:g} GB,\n"
        "no file access.\n"
        "ctrl+r (or ctrl+enter where the terminal sends it) runs the query; F2-F5 load an example,\n"
        "F1 shows this help. Tab moves between the editor and the results.\n\n"
        "Too narrow for every column of a result, the table shows the first columns whole and hides the\n"
        "rest (the status line names them: select fewer to see them); a text column may be cut with … to fit."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run", priority=True),
        Binding("ctrl+enter", "run", "Run", show=False, priority=True),
        # F1 is help here, as the editor takes "?" as text; the examples follow it.
        Binding("f1", "app.help", "Help", priority=True),
        *(Binding(f"f{i}", f"example({i - 2})", name, priority=True)
          for i, (name, _) in enumerate(EXAMPLES, 2)),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.result: QueryResult | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar(str(self.store.path), "sql")
        yield TextArea(EXAMPLES[0][1], id="sql-editor", show_line_numbers=True, tab_behavior="focus")
        yield Static(Text("ctrl+r runs the query", style="dim"), id="sql-status", classes="status")
        yield ResultsTable(id="sql-results")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(TextArea).focus()

    def action_example(self, index: int) -> None:
        editor = self.query_one(TextArea)
        editor.text = EXAMPLES[index][1]
        editor.focus()
        self.action_run()

    def action_run(self) -> None:
        sql = self.query_one(TextArea).text
        if not sql.strip():
            return
        self._status(Text("running…", style="dim"))
        self.load("query", "query", partial(run_sql, self.store, sql), QueryDone)

    def on_query_done(self, message: QueryDone) -> None:
        self.result = message.result
        self.query_one(ResultsTable).show(message.result)
        self._result_status()

    def _result_status(self) -> None:
        result = self.result
        if result is None:
            return
        n = len(result.rows)
        text = Text(f"{n:,} row{'s' if n != 1 else ''}", style="bold")
        if result.truncated:
            text.append(f" (stopped at {SQL_ROW_LIMIT:,}; more exist)", style="bold yellow")
        text.append(f" in {result.seconds:.3f} s", style="dim")
        hidden = self.query_one(ResultsTable).hidden
        if hidden:  # the table shows whole columns only: say which did not fit, and how to see them
            text.append(f" · too narrow for: {', '.join(hidden)}", style="yellow")
        self._status(text)

    def on_resize(self) -> None:
        self.call_after_refresh(self._result_status)

    def on_load_failed(self, message: LoadFailed) -> None:
        # Shown in place, where the results would be; the previous results are cleared.
        self.result = None
        self.query_one(ResultsTable).show_nothing()
        self._status(Text("error: ", style="bold red").append_text(safe(message.error, newlines=False)))

    def _status(self, text: Text) -> None:
        self.query_one("#sql-status", Static).update(text)
