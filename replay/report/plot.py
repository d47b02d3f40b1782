"""The context-growth plot: prompt tokens per step as an inline SVG, pure function of plain numbers.

The model's window is drawn as a line when it is on the scale (the context reached half of it or
more); otherwise its size is written in the corner, so a small run is not flattened against a
200,000-token ceiling. The step that pushed the context over (or, for a context bomb, the one the
diagnosis names) is marked and linked to its place in the timeline.
"""

from __future__ import annotations

from collections.abc import Sequence

from .markup import number, text

__all__ = ["context_plot", "WIDTH", "HEIGHT"]

WIDTH, HEIGHT = 760, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 16, 28
_MAX_MARKERS = 300  # beyond this many steps only the line is drawn: the page stays small


def context_plot(points: Sequence[tuple[int, int]], window: int | None, over_step: int | None) -> str:
    """``points`` are (step, prompt tokens); returns an ``<svg>`` element (empty note if none)."""
    if not points:
        return '<p class="mut">No step recorded its prompt size.</p>'
    peak = max(t for _, t in points)
    window_on_scale = window is not None and peak >= window / 2
    top = max(peak, window if window is not None and window_on_scale else 0) * 1.08 or 1
    first, last = points[0][0], points[-1][0]
    span = max(1, last - first)
    w, h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(step: int) -> float:
        return _LEFT + (step - first) / span * w

    def y(tokens: float) -> float:
        return _TOP + h - tokens / top * h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="prompt tokens per step">',
             f'<line x1="{_LEFT}" y1="{_TOP + h}" x2="{_LEFT + w}" y2="{_TOP + h}" stroke="#98a2b3"/>',
             f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + h}" stroke="#98a2b3"/>',
             f'<text x="{_LEFT - 6}" y="{_TOP + 10}" text-anchor="end">{number(int(top))}</text>',
             f'<text x="{_LEFT - 6}" y="{_TOP + h}" text-anchor="end">0</text>',
             f'<text x="{_LEFT}" y="{HEIGHT - 8}">step {first}</text>',
             f'<text x="{_LEFT + w}" y="{HEIGHT - 8}" text-anchor="end">step {last}</text>']
    if window is None:
        parts.append(f'<text x="{_LEFT + 8}" y="{_TOP + 10}">window unknown for this model</text>')
    elif window_on_scale:
        parts.append(f'<line class="window" x1="{_LEFT}" y1="{y(window):.1f}" x2="{_LEFT + w}" y2="{y(window):.1f}" '
                     f'stroke="#b42318" stroke-dasharray="6 4"/>'
                     f'<text x="{_LEFT + 4}" y="{y(window) - 4:.1f}" style="fill:#b42318">'
                     f"window {number(window)} tokens</text>")
    else:
        parts.append(f'<text x="{_LEFT + 8}" y="{_TOP + 10}">window {number(window)} tokens (off this scale)</text>')
    line = " ".join(f"{x(s):.1f},{y(t):.1f}" for s, t in points)
    parts.append(f'<polyline fill="none" stroke="#3538cd" stroke-width="1.5" points="{line}"/>')
    if len(points) <= _MAX_MARKERS:
        parts += [f'<a href="#step-{s}"><circle cx="{x(s):.1f}" cy="{y(t):.1f}" r="2.5" fill="#3538cd">'
                  f"<title>step {s}: {number(t)} prompt tokens</title></circle></a>" for s, t in points]
    marked = dict(points).get(over_step) if over_step is not None else None
    if over_step is not None and marked is not None:
        parts.append(f'<a href="#step-{over_step}"><circle class="over" cx="{x(over_step):.1f}" '
                     f'cy="{y(marked):.1f}" r="6" fill="none" stroke="#b42318" stroke-width="2">'
                     f"<title>step {over_step} pushed the context over</title></circle>"
                     f'<text x="{x(over_step):.1f}" y="{max(_TOP + 10, y(marked) - 10):.1f}" text-anchor="middle" '
                     f'style="fill:#b42318">{text(f"step {over_step}")}</text></a>')
    parts.append("</svg>")
    return "".join(parts)
