"""The index page of ``looptrace report --all``: one sortable row per run, and the roll-ups.

Sorting is the page's only script, inline and allowed by its hash (``markup.page``); each cell
carries its sort value in ``data-v`` so numbers sort as numbers and unknown values sort last.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from .data import IndexRow, Rollup
from .markup import money, number, page, seconds, text, when

__all__ = ["render_index", "page_name", "SORT_SCRIPT"]

SORT_SCRIPT = """
document.body.dataset.sortable = "ready";
document.querySelectorAll("table.sortable th[data-k]").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], i = th.cellIndex;
    var asc = th.getAttribute("aria-sort") !== "ascending", num = th.dataset.k === "n";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[i].dataset.v, y = b.cells[i].dataset.v;
      if (x === "" || y === "") return x === y ? 0 : (x === "" ? 1 : -1);
      var c = num ? Number(x) - Number(y) : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
  });
});
"""

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


def page_name(run_id: str) -> str:
    """A file name for a run's page: the id when it is a safe name, else a cleaned id and a hash."""
    clean = _UNSAFE_NAME.sub("_", run_id)[:80]
    if clean == run_id and not run_id.startswith("."):
        return f"{run_id}.html"
    return f"{clean.lstrip('.')}-{hashlib.sha256(run_id.encode()).hexdigest()[:10]}.html"


def _cell(shown: str, value: object, *, numeric: bool = False) -> str:
    v = "" if value is None else str(value)
    return f'<td{" class=n" if numeric else ""} data-v="{text(v)}">{shown}</td>'


def _head(columns: Sequence[tuple[str, bool]]) -> str:
    return "<thead><tr>" + "".join(
        f'<th data-k="{"n" if numeric else "s"}"{" class=n" if numeric else ""}>{text(name)}</th>'
        for name, numeric in columns) + "</tr></thead>"


def _run_row(r: IndexRow) -> str:
    link = f'<a href="{text(page_name(r.run_id))}">{text(r.run_id[:12])}</a>'
    status = f'<span class="{"ok" if r.status == "ok" else "bad"}">{text(r.status)}</span>'
    return (f"<tr>{_cell(link, r.run_id)}{_cell(text(r.agent), r.agent)}{_cell(text(r.model), r.model)}"
            f"{_cell(status, r.status)}{_cell(text(r.label or 'not analysed'), r.label)}"
            f"{_cell(number(r.n_steps), r.n_steps, numeric=True)}{_cell(number(r.tokens), r.tokens, numeric=True)}"
            f"{_cell(money(r.cost_usd), r.cost_usd, numeric=True)}"
            f"{_cell(seconds(r.seconds), r.seconds, numeric=True)}{_cell(when(r.started_at), r.started_at)}</tr>")


def _runs(rows: Sequence[IndexRow]) -> str:
    head = _head([("run", False), ("agent", False), ("model", False), ("status", False), ("label", False),
                  ("steps", True), ("tokens", True), ("cost", True), ("duration", True), ("started", False)])
    body = "".join(_run_row(r) for r in rows)
    return f'<table class="sortable" id="runs">{head}<tbody>{body}</tbody></table>'


def _rollup(r: Rollup) -> str:
    numeric = [c != r.by for c in r.columns]
    head = _head(list(zip(r.columns, numeric)))
    body = "".join(
        "<tr>" + "".join(
            _cell(money(v) if c == "cost_usd" else (number(v) if n else text(v if v is not None else "(none)")), v,
                  numeric=n)
            for c, n, v in zip(r.columns, numeric, row)) + "</tr>"
        for row in r.rows)
    return (f'<h3>By {text(r.by)}</h3><table class="sortable rollup" id="by-{text(r.by)}">{head}'
            f"<tbody>{body}</tbody></table>")


def render_index(rows: Sequence[IndexRow], more: bool, rollups: Sequence[Rollup], *, store: str) -> str:
    """The index page: the runs table (newest first, click a heading to sort) and the roll-ups."""
    cut = f'<p class="mut">Only the newest {len(rows):,} runs are listed.</p>' if more else ""
    body = (f"<h1>looptrace runs</h1><p class=mut>{text(store)} · {len(rows):,} runs · click a column to sort</p>"
            f"{cut}{_runs(rows)}<h2>Where the tokens and the money went</h2>"
            '<p class="mut">From the views usage_by_agent, usage_by_model and usage_by_day; '
            "“unknown” is a cost the store has no price for, not zero.</p>"
            + "".join(_rollup(r) for r in rollups))
    return page("looptrace runs", body, script=SORT_SCRIPT)
