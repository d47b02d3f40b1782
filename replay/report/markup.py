"""The one way trace text reaches a page, and the pieces every page shares.

Trace text comes from models, tools and other people's programs: a ``<script>`` or an ``onerror=``
in an observation must be shown, never run. ``text()`` is the only door: terminal-control and bidi
characters become visible escapes (``\\x1b``, as the terminal shows them), then ``html.escape``
quotes ``<>&"'``. As a second wall, each page carries a Content-Security-Policy that allows no
script but the report's own (by hash), no network and no external resource.
"""

from __future__ import annotations

import base64
import hashlib
import html
from datetime import datetime

from looptrace.tracer.cli.terminal import visible

__all__ = ["text", "collapsible", "page", "number", "money", "when", "seconds", "PREVIEW"]

PREVIEW = 300  # characters of a long text shown before it is expanded

CSS = """
:root{--fg:#1d2330;--mut:#667085;--bd:#d0d5dd;--bg:#fff;--alt:#f6f7f9;--bad:#b42318;--ok:#067647;--acc:#3538cd}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg);
margin:0 auto;max-width:1100px;padding:16px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:24px 0 8px;border-bottom:1px solid var(--bd)}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:3px 8px;border-bottom:1px solid var(--bd);
vertical-align:top}th{background:var(--alt);cursor:default}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12px/1.4 ui-monospace,Menlo,Consolas,monospace;
background:var(--alt);padding:4px 6px;border-radius:4px}
.mut{color:var(--mut)}.bad{color:var(--bad)}.ok{color:var(--ok)}.tag{display:inline-block;padding:0 6px;
border-radius:8px;border:1px solid currentColor;font-size:12px}
.step{border:1px solid var(--bd);border-radius:6px;padding:6px 10px;margin:8px 0}.step.err{border-color:var(--bad)}
.step.ev{box-shadow:inset 4px 0 0 var(--acc)}.step:target{outline:2px solid var(--acc)}
.k{font-weight:600;min-width:88px;display:inline-block}summary{cursor:pointer}dl{margin:0}
dt{font-weight:600;float:left;clear:left;width:110px}dd{margin:0 0 2px 120px}
svg text{font:11px system-ui,sans-serif;fill:var(--mut)}th[data-k]{cursor:pointer}
"""


def text(value: object) -> str:
    """Any value as page text: control characters visible, every markup character escaped."""
    return html.escape(visible("" if value is None else str(value)), quote=True)


def collapsible(value: str | None, full_bytes: int, *, kind: str) -> str:
    """A text block: short text as is; long text as a preview that expands to all that was kept."""
    if value is None:
        return ""
    cut = full_bytes - len(value.encode())
    note = (f'<div class="mut">{number(cut)} more bytes of this {text(kind)} are not in this report '
            f"(read them with <code>looptrace sql</code> or <code>looptrace view</code>)</div>") if cut > 0 else ""
    if len(value) <= PREVIEW:
        return f"<pre>{text(value)}</pre>{note}"
    return (f"<details><summary><span class=mut>{text(kind)}, {number(full_bytes)} bytes:</span> "
            f"{text(value[:PREVIEW].replace(chr(10), ' '))}…</summary><pre>{text(value)}</pre>{note}</details>")


def number(n: int | float | None) -> str:
    return "—" if n is None else f"{n:,}"


def money(usd: float | None) -> str:
    """A cost; an unknown one (NULL) is shown as unknown, not as $0."""
    return "unknown" if usd is None else f"${usd:,.4f}"


def when(t: datetime | None) -> str:
    return "—" if t is None else t.strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def page(title: str, body: str, *, script: str = "") -> str:
    """A whole self-contained page: inline CSS, no external resource, scripts only by hash."""
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    script_src = f"'sha256-{digest}'" if script else "'none'"
    csp = (f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {script_src}; "
           "base-uri 'none'; form-action 'none'")
    tag = f"<script>{script}</script>" if script else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>{text(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n{tag}</body></html>\n")
