"""The report in a real browser (headless Chromium, no network): it loads, shows its steps and its
<svg> plot, and a <script> or onerror= planted in the trace never runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.replay.report import write_all
from looptrace.replay.report.index import page_name
from looptrace.tracer import Tracing
from looptrace.tracer.store import Store

from .browser import dump_dom

# One worker builds this module's set-up once (tests/README.md: shared set-ups under xdist).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("report_browser")]

PLANTED = '<script>document.title="pwned"</script>'
ONERROR = "<img src=x onerror=\"document.title='pwned2'\">"


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("report")
    db = folder / "hostile.duckdb"
    with Tracing(db) as tracing:
        with tracing.run(f"agent{PLANTED}", task=f"task {ONERROR}", model="claude-sonnet-4-5") as run:
            for i in range(3):
                with run.step(f"thought {i} {PLANTED}") as step:
                    with step.tool_call(f"tool{PLANTED}", {"q": ONERROR}) as call:
                        call.result(f"observation {i} {PLANTED}{ONERROR}\x1b[2J")
                    step.add_usage(1000 * (i + 1), 20, 0.01, 1000 * (i + 1))
            run.finish("error", error=ONERROR)
    analyze_store(Store(db))
    write_all(Store(db), folder / "out", label=f"store {PLANTED}")
    return folder / "out", run.run_id


def test_run_page_loads_offline_with_steps_and_plot_and_no_planted_script_runs(reported: tuple[Path, str]) -> None:
    out, run_id = reported
    dom = dump_dom((out / page_name(run_id)).as_uri())
    assert f"<title>looptrace run {run_id}</title>" in dom  # a planted script would have changed it
    assert "pwned" not in dom.split("</title>")[0]
    assert dom.count('class="step') == 3 and 'id="step-3"' in dom
    assert "<svg" in dom and "<polyline" in dom
    assert "&lt;script&gt;document.title=\"pwned\"&lt;/script&gt;" in dom  # shown as text
    assert "\\x1b[2J" in dom  # a terminal control shown visibly


def test_index_loads_offline_its_own_script_runs_and_planted_ones_do_not(reported: tuple[Path, str]) -> None:
    out, run_id = reported
    dom = dump_dom((out / "index.html").as_uri())
    assert "<title>looptrace runs</title>" in dom
    assert 'data-sortable="ready"' in dom  # the index's own sorting script ran (allowed by its hash)
    assert f'href="{page_name(run_id)}"' in dom and 'id="by-agent"' in dom and 'id="by-day"' in dom
    assert "&lt;script&gt;" in dom
