"""`looptrace report`: pages rendered from a real store, hostile text escaped, small pages, the index."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from looptrace.replay.analyzer import analyze_store
from looptrace.replay.report import load_index, load_report, page_name, render_run, write_all, write_run
from looptrace.replay.report.data import Call, Diagnosis, Manifest, RunReport, Step
from looptrace.replay.report.page import over_step
from looptrace.replay.report.plot import context_plot
from looptrace.tracer import Tracing
from looptrace.tracer.store import Store

from .conftest import PYTHON, ROOT, python_env, query

PLANTED = ('<script>document.title="pwned"</script>'
           '<img src=x onerror="document.title=\'pwned2\'">\x1b]0;term\x07 end')


def _step(n: int, *, context: int | None = 1000, tool: str = "read", observation: str = "fine") -> Step:
    t = datetime(2026, 11, 1, 10, 0, n)
    return Step(n, "thinking", 8, (Call(tool, '{"p": 1}', 8, observation, len(observation), False, None),),
                100, 10, context, 0.01, t, t + timedelta(milliseconds=250))


def _report(steps: tuple[Step, ...], diagnoses: tuple[Diagnosis, ...] = (), window: int = 10_000) -> RunReport:
    return RunReport(
        run_id="r1", agent=PLANTED, task=PLANTED, model="m", status="error", source="test", parent_run_id=None,
        replay_of=None, forked_from=None, started_at=None, ended_at=None, seconds=1.0, n_steps=len(steps),
        n_llm_calls=1, input_tokens=1, output_tokens=1, cost_usd=0.0, answer=None, error=PLANTED,
        diagnoses=diagnoses, steps=steps, more_steps=False, manifest=Manifest("none", ("rule", "count"), ()),
        window=window, text_cap=4000,
    )


def test_planted_markup_is_shown_as_text_never_as_markup() -> None:
    steps = (_step(1, tool=PLANTED, observation=PLANTED * 20),)
    html = render_run(_report(steps, (Diagnosis("stagnation", True, 1, 1, {"x": PLANTED}, PLANTED),)))
    assert "<script" not in html and "<img" not in html and "onerror=\"" not in html
    assert "&lt;script&gt;document.title=&quot;pwned&quot;&lt;/script&gt;" in html
    assert "\\x1b]0;term\\x07" in html and "\x1b" not in html  # shown visibly, not dropped, not obeyed
    assert "script-src 'none'" in html  # and a page with no script of its own allows none


@pytest.mark.parametrize(("contexts", "diagnosis", "expected"), [
    ((100, 5000, 12_000, 13_000), None, 3),  # the first step at or over the window
    ((100, 200), Diagnosis("context_bomb", True, 2, 2, {"largest_observation_step": 2}, None), 2),
    ((100, 200), Diagnosis("context_bomb", True, 1, 2, {}, None), 1),
    ((100, 200), Diagnosis("stagnation", True, 1, 2, {}, None), None),
])
def test_the_step_that_pushed_the_context_over(contexts: tuple[int, ...], diagnosis: Diagnosis | None,
                                               expected: int | None) -> None:
    steps = tuple(_step(i, context=c) for i, c in enumerate(contexts, 1))
    assert over_step(_report(steps, (diagnosis,) if diagnosis else ())) == expected


def test_plot_draws_the_window_when_the_context_nears_it_and_marks_the_step() -> None:
    near = context_plot([(1, 1000), (2, 9000), (3, 11_000)], 10_000, 3)
    assert near.startswith("<svg") and 'class="window"' in near and 'class="over"' in near
    assert 'href="#step-3"' in near
    far = context_plot([(1, 1000), (2, 1200)], 200_000, None)
    assert 'class="window"' not in far and "off this scale" in far and 'class="over"' not in far
    assert context_plot([], 1000, None).startswith("<p")


def test_evidence_steps_link_to_steps_and_skip_projections() -> None:
    d = Diagnosis("context_bomb", True, 2, 3, {"peak_step": 2, "projected_overflow_step": 9}, None)
    assert d.evidence_steps == [2, 3]
    assert Diagnosis("hallucinated_tool", True, 1, 9, {"steps": [4, 1]}, None).evidence_steps == [1, 4]


def test_report_all_writes_an_index_and_a_page_per_demo_run(demo: Path, tmp_path: Path) -> None:
    pages, size = write_all(Store(demo), tmp_path, label="demo")
    runs = {r for (r,) in query(demo, "SELECT run_id FROM runs")}
    assert pages == len(runs) and size > 0
    index = (tmp_path / "index.html").read_text()
    linked = set(re.findall(r'<a href="([^"]+\.html)">', index))
    assert linked == {page_name(r) for r in runs}
    assert all((tmp_path / p).stat().st_size < 2_000_000 for p in linked)
    assert index.count("<tr>") >= len(runs) + 3  # runs, then the three roll-ups (agent, model, day)
    overflow = next(r for r in load_index(Store(demo))[0] if r.status == "context_overflow")
    page = (tmp_path / page_name(overflow.run_id)).read_text()
    assert "context_bomb" in page and "<svg" in page and 'id="step-1"' in page and 'href="#step-2"' in page


@pytest.mark.slow
def test_a_200_step_run_with_big_texts_stays_under_2_mb_and_says_what_it_cut(tmp_path: Path) -> None:
    db = tmp_path / "big.duckdb"
    with Tracing(db) as tracing:
        with tracing.run("big", task="many steps", model="claude-sonnet-4-5") as run:
            for i in range(200):
                with run.step("t" * 20_000) as step:
                    with step.tool_call("read", {"blob": "a" * 20_000}) as call:
                        call.result(f"obs {i} " + "x" * 100_000)
            run.finish("ok")
    out = tmp_path / "big.html"
    size = write_run(Store(db), run.run_id, out)
    html = out.read_text()
    assert size == out.stat().st_size < 2_000_000
    assert html.count('class="step') == 200 and 'id="step-200"' in html
    assert "more bytes of this observation are not in this report" in html


@pytest.mark.slow
def test_report_command_writes_a_page_and_refuses_an_unknown_run(demo: Path, tmp_path: Path) -> None:
    run_id = load_index(Store(demo))[0][0].run_id
    looptrace = shutil.which("looptrace", path=str(Path(PYTHON).parent)) or "looptrace"
    ok = subprocess.run([looptrace, "report", run_id, "--db", str(demo), "-o", str(tmp_path / "r.html")],
                        capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    short = subprocess.run([looptrace, "report", run_id[:12], "--db", str(demo), "-o", str(tmp_path / "s.html")],
                           capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
    assert short.returncode == 0 and f"Run {run_id}" in (tmp_path / "s.html").read_text()  # as the viewer shows it
    bad = subprocess.run([looptrace, "report", "nope", "--db", str(demo), "-o", str(tmp_path / "n.html")],
                         capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
    assert bad.returncode == 1 and "no run 'nope'" in bad.stderr and not (tmp_path / "n.html").exists()
    # A folder named with a trailing slash gets RUN_ID.html in it (it was written as a file named 'pages');
    # an unknown run leaves no folder behind.
    into = subprocess.run([looptrace, "report", run_id[:12], "--db", str(demo), "-o", f"{tmp_path / 'pages'}/"],
                          capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
    assert into.returncode == 0, into.stderr
    assert (tmp_path / "pages" / f"{run_id[:12]}.html").read_text().startswith("<!DOCTYPE html>")
    gone = subprocess.run([looptrace, "report", "nope", "--db", str(demo), "-o", f"{tmp_path / 'none'}/"],
                          capture_output=True, text=True, env=python_env(), cwd=ROOT, timeout=120)
    assert gone.returncode == 1 and not (tmp_path / "none").exists()


def test_a_store_without_diagnoses_says_so(tmp_path: Path) -> None:
    db = tmp_path / "plain.duckdb"
    with Tracing(db) as tracing:
        with tracing.run("a", task="t", model="m") as run:
            with run.step("hi"):
                pass
            run.finish("ok")
    report = load_report(Store(db), run.run_id)
    assert report is not None and "Not analysed" in render_run(report)
    analyze_store(Store(db))
    report = load_report(Store(db), run.run_id)
    assert report is not None and report.primary is not None


def test_an_ambiguous_prefix_is_refused(demo: Path, tmp_path: Path) -> None:
    from looptrace.replay.report import ReportError

    with pytest.raises(ReportError, match="several run ids"):
        write_run(Store(demo), "", tmp_path / "x.html")
    assert not (tmp_path / "x.html").exists()


def test_the_redaction_manifest_comes_from_span_attributes_or_a_redactions_view(tmp_path: Path) -> None:
    db = tmp_path / "secrets.duckdb"
    key = "sk-ant-api03-PLANTEDsecretKEY0123456789abcdef"
    with Tracing(db) as tracing:
        with tracing.run("a", task="t", model="m") as run:
            with run.step("thinking") as step, step.tool_call("env", {"k": 1}) as call:
                call.result(f"ANTHROPIC_API_KEY={key}")
            run.finish("ok")
    report = load_report(Store(db), run.run_id)
    # The store's `redactions` view (the manifest the sink writes) is shown as is: rule and where, no value.
    assert report is not None and report.manifest.source == "redactions view"
    rule = report.manifest.columns.index("rule")
    assert "anthropic_key" in {row[rule] for row in report.manifest.rows}
    html = render_run(report)
    assert key not in html and "anthropic_key" in html


@pytest.mark.parametrize(("status", "label", "status_tag", "verdict_tag"), [
    ("ok", "stagnation", '<span class="tag ">ok</span>', '<span class="tag bad">stagnation</span>'),  # issue 28
    ("ok", "ok", '<span class="tag ok">ok</span>', '<span class="tag ok">ok</span>'),
    ("max_iters", "cap_hit", '<span class="tag bad">max_iters</span>', '<span class="tag bad">cap_hit</span>'),
    ("ok", None, '<span class="tag ok">ok</span>', '<span class="tag mut">not analysed</span>'),
])
def test_the_status_and_the_verdict_are_each_named_for_whose_word_they_are(
        status: str, label: str | None, status_tag: str, verdict_tag: str) -> None:
    from dataclasses import replace

    diagnoses = (Diagnosis(label, True, 1, 1, {}, None),) if label else ()
    html = render_run(replace(_report((_step(1),), diagnoses), status=status))
    line = html[html.index('<p class="verdict">'):]
    line = line[:line.index("</p>")]
    assert "status (how the run ended, as recorded):" in line and "verdict (the primary diagnosis):" in line
    said, verdict = line.split(" · ")
    assert status_tag in said and verdict_tag in verdict


def test_a_run_whose_source_kept_no_model_calls_says_so(demo: Path, tmp_path: Path) -> None:
    """An imported transcript's page said "model calls 0": its calls were made, its file kept none."""
    from looptrace.tracer.ingest.files.importing import write_trajectories
    from looptrace.tracer.ingest.files.trajectory import ImportedStep, Trajectory

    store = Store(tmp_path / "imported.duckdb")
    write_trajectories(store, [Trajectory(source="t.json", agent="a", status="ok", steps=[
        ImportedStep(step=1, tool="ls", args={}, observation="a.txt"), ImportedStep(step=2, thought="Done.")])])
    [(run_id,)] = query(store.path, "SELECT run_id FROM runs")
    report = load_report(store, run_id)
    assert report is not None and "<dt>model calls</dt><dd>not recorded</dd>" in render_run(report)
    traced = load_report(Store(demo), load_index(Store(demo))[0][0].run_id)
    assert traced is not None and re.search(r"<dt>model calls</dt><dd>[1-9][\d,]*</dd>", render_run(traced))
