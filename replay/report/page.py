"""One run's page: header, diagnosis with its evidence steps linked, context plot, timeline, redactions.

A pure function of a ``RunReport``: no I/O, every piece of trace text through ``markup.text``.
"""

from __future__ import annotations

import json

from .data import Call, Diagnosis, Manifest, RunReport, Step
from .markup import collapsible, money, number, page, seconds, text, when
from .plot import context_plot

__all__ = ["render_run", "over_step"]


def over_step(report: RunReport) -> int | None:
    """The step that pushed the context over the window, else the one a context-bomb finding names."""
    for s in report.steps:
        if report.window is not None and (s.prompt_tokens or 0) >= report.window:
            return s.step
    for d in report.diagnoses:
        if d.label == "context_bomb":
            for key in ("largest_observation_step", "peak_step"):
                if isinstance(d.evidence.get(key), int):
                    return int(d.evidence[key])
            return d.first_step
    return None


def _verdict(r: RunReport) -> str:
    """The run's status and looptrace's verdict, each named for whose word it is.

    They answer different questions: the status is how the run ended as its source recorded it (an
    OTLP agent that looped seven times and stopped says ``ok``); the verdict is what the analyzer
    makes of the steps. Side by side as two unlabelled badges, a green ``ok`` beside a red
    ``stagnation`` read as a contradiction."""
    primary = r.primary
    verdict = primary.label if primary is not None else "not analysed"
    verdict_class = "ok" if verdict == "ok" else "mut" if primary is None else "bad"
    # The status is green only when the verdict agrees; otherwise it is plain: a recorded fact, not a finding.
    status_class = "bad" if r.status != "ok" else "ok" if verdict in ("ok", "not analysed") else ""
    return (f'<p class="verdict"><span class="mut">status (how the run ended, as recorded):</span> '
            f'<span class="tag {status_class}">{text(r.status)}</span> · '
            f'<span class="mut">looptrace\'s verdict (the primary diagnosis):</span> '
            f'<span class="tag {verdict_class}">{text(verdict)}</span></p>')


def _header(r: RunReport) -> str:
    facts = [("agent", r.agent), ("model", r.model), ("source", r.source), ("started", when(r.started_at)),
             ("duration", seconds(r.seconds)), ("steps", number(r.n_steps)),
             # Steps and no call recorded: the source kept none (an imported transcript), not none made.
             ("model calls", "not recorded" if not r.n_llm_calls and r.n_steps else number(r.n_llm_calls)),
             ("tokens", f"{number(r.input_tokens)} in, {number(r.output_tokens)} out"), ("cost", money(r.cost_usd))]
    for name, value in (("parent run", r.parent_run_id), ("replay of", r.replay_of), ("forked from", r.forked_from)):
        if value:
            facts.append((name, value))
    rows = "".join(f"<dt>{text(k)}</dt><dd>{text(v)}</dd>" for k, v in facts)
    extra = "".join(f"<h2>{title}</h2>{collapsible(v, len(v.encode()), kind=title)}"
                    for title, v in (("Task", r.task), ("Answer", r.answer), ("Error", r.error)) if v)
    return f"<header><h1>Run {text(r.run_id)}</h1>{_verdict(r)}<dl>{rows}</dl></header>{extra}"


def _diagnosis(d: Diagnosis) -> str:
    links = ", ".join(f'<a href="#step-{s}">{s}</a>' for s in d.evidence_steps) or "none"
    evidence = json.dumps(d.evidence, indent=1, sort_keys=True, default=str)
    role = "primary" if d.is_primary else "secondary"
    return (f'<div class="diag"><p><span class="tag {"ok" if d.label == "ok" else "bad"}">{text(d.label)}</span> '
            f'<span class="mut">{role}</span> {text(d.explanation or "")}</p>'
            f"<p>Evidence steps: {links}</p>{collapsible(evidence, len(evidence.encode()), kind='evidence')}</div>")


def _diagnoses(r: RunReport) -> str:
    if not r.diagnoses:
        return '<p class="mut">Not analysed: run <code>looptrace analyze</code> on the store, then report again.</p>'
    return "".join(_diagnosis(d) for d in r.diagnoses)


def _call(c: Call) -> str:
    error = (f'<div class="bad">error: {text(c.error_type or "tool error")}</div>' if c.is_error else "")
    return (f'<div class="call"><span class="k">tool</span> <code>{text(c.tool)}</code>{error}'
            f'<div><span class="k">arguments</span>{collapsible(c.args, c.args_bytes, kind="arguments")}</div>'
            f'<div><span class="k">observation</span>'
            f"{collapsible(c.observation, c.observation_bytes, kind='observation')}</div></div>")


def _no_call(s: Step) -> str:
    """What a step without a tool call is: an answer, unless its model call failed or was lost."""
    if s.call_error is not None:
        return '<div class="mut">no tool call: the model call failed</div>'
    if s.call_missing:
        return '<div class="mut">no tool call recorded</div>'
    return '<div class="mut">no tool call (final answer)</div>'


def _step(s: Step, evidence: set[int]) -> str:
    classes = "step" + (" err" if s.is_error else "") + (" ev" if s.step in evidence else "")
    timing = f"{s.duration_ms:,} ms" if s.duration_ms is not None else "—"
    tokens = ("tokens unknown" if s.input_tokens is None and s.output_tokens is None
              else f"{number(s.input_tokens)} in / {number(s.output_tokens)} out")
    head = (f'<div class="mut"><b>Step {s.step}</b> · {timing} · {tokens} · prompt {number(s.prompt_tokens)} · '
            f"cost {money(s.cost_usd)}</div>")
    model = ""
    if s.call_error is not None:
        model = f'<div class="bad">model call failed: {collapsible(s.call_error, len(s.call_error.encode()), kind="error")}</div>'
    elif s.call_missing:
        model = ('<div class="bad">model call missing: the trace lost it (a span batch that never arrived); '
                 "this step is read from the next call's request</div>")
    thought = (f'<div><span class="k">thought</span>{collapsible(s.thought, s.thought_bytes, kind="thought")}</div>'
               if s.thought else "")
    calls = "".join(_call(c) for c in s.calls) or _no_call(s)
    return f'<section class="{classes}" id="step-{s.step}">{head}{thought}{model}{calls}</section>'


def _manifest(m: Manifest) -> str:
    if not m.rows:
        return '<p class="mut">Nothing was redacted in this run.</p>'
    head = "".join(f"<th>{text(c)}</th>" for c in m.columns)
    body = "".join("<tr>" + "".join(f"<td>{text(v)}</td>" for v in row) + "</tr>" for row in m.rows)
    return f'<p class="mut">From the store\'s {text(m.source)}.</p><table><tr>{head}</tr>{body}</table>'


def render_run(r: RunReport) -> str:
    """The whole HTML page of one run."""
    evidence = set(r.primary.evidence_steps) if r.primary else set()
    points = [(s.step, s.prompt_tokens) for s in r.steps if s.prompt_tokens is not None]
    more = (f'<p class="mut">Only the first {len(r.steps):,} steps are shown.</p>' if r.more_steps else "")
    body = (
        f"{_header(r)}"
        f"<h2>Diagnosis</h2>{_diagnoses(r)}"
        f"<h2>Context growth</h2>"
        f'<p class="mut">Prompt tokens sent at each step; the model\'s window is '
        f'{number(r.window) + " tokens" if r.window is not None else "unknown"}.</p>'
        f"{context_plot(points, r.window, over_step(r))}"
        f"<h2>Steps</h2>{more}{''.join(_step(s, evidence) for s in r.steps)}"
        f"<h2>Redactions</h2>{_manifest(r.manifest)}"
        f'<footer class="mut"><p>looptrace report · text fields cut at {number(r.text_cap)} characters</p></footer>'
    )
    return page(f"looptrace run {r.run_id}", body)
