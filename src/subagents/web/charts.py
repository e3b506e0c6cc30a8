"""Charts drawn here as SVG, so the page needs no chart library: bars (one per row, for a
cost or a token count), columns (one per day) and a Gantt of a job's runs. Colours come from
the stylesheet (classes), never from inline style: the Content-Security-Policy allows none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from subagents.web.layout import esc

WIDTH = 720
ROW = 24
LABEL = 220
VALUE = 180


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def bars(items: Sequence[tuple[str, float, str]], *, title: str) -> str:
    """A horizontal bar per ``(label, value, shown value)``, longest for the largest value."""
    if not items:
        return ""
    top = max(value for _, value, _ in items) or 1.0
    room = WIDTH - LABEL - VALUE
    height = ROW * len(items) + 4
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{esc(title)}">'
    ]
    for i, (label, value, shown) in enumerate(items):
        y = i * ROW + 2
        width = max(1.0, room * value / top) if value > 0 else 0.0
        out.append(
            f"<g><title>{esc(label)}: {esc(shown)}</title>"
            f'<text x="{LABEL - 8}" y="{y + 16}" class="label" text-anchor="end">'
            f"{esc(_cut(label, 30))}</text>"
            f'<rect x="{LABEL}" y="{y + 3}" width="{width:.1f}" height="{ROW - 8}" class="bar"/>'
            f'<text x="{LABEL + width + 6:.1f}" y="{y + 16}" class="value">{esc(shown)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)


def columns(items: Sequence[tuple[str, float, str]], *, title: str) -> str:
    """A column per ``(label, value, shown value)`` (days, oldest first), on one baseline."""
    if not items:
        return ""
    top = max(value for _, value, _ in items) or 1.0
    height, base, chart_top = 200, 170, 20
    step = min(60.0, (WIDTH - 20) / len(items))
    out = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'role="img" aria-label="{esc(title)}">',
        f'<line x1="10" y1="{base}" x2="{WIDTH - 10}" y2="{base}" class="axis"/>',
    ]
    for i, (label, value, shown) in enumerate(items):
        x = 10 + i * step
        h = (base - chart_top) * value / top if value > 0 else 0.0
        out.append(
            f"<g><title>{esc(label)}: {esc(shown)}</title>"
            f'<rect x="{x + 4:.1f}" y="{base - h:.1f}" width="{step - 8:.1f}" height="{h:.1f}" '
            f'class="bar"/><text x="{x + step / 2:.1f}" y="{base + 16}" class="label" '
            f'text-anchor="middle">{esc(label[5:] if len(label) == 10 else label)}</text>'
            + (
                f'<text x="{x + step / 2:.1f}" y="{base - h - 4:.1f}" class="value" '
                f'text-anchor="middle">{esc(shown.split(" ")[0])}</text>'
                if len(items) <= 12
                else ""
            )
            + "</g>"
        )
    out.append("</svg>")
    return "".join(out)


@dataclass
class Span:
    """One run on a Gantt: from ``start`` to ``end`` (None: still running), epoch seconds."""

    label: str
    start: float | None
    end: float | None
    status: str
    link: str = ""


def gantt(spans: Sequence[Span], *, now: float | None = None) -> str:
    """A bar per run over the job's time: which ran side by side, which waited for which."""
    now = time.time() if now is None else now
    known = [s for s in spans if s.start is not None]
    if not spans:
        return ""
    t0 = min((s.start for s in known if s.start is not None), default=now)
    t1 = max([now if s.end is None else s.end for s in known] or [now])
    total = max(t1 - t0, 0.001)
    room = WIDTH - LABEL - 20
    height = ROW * len(spans) + 26
    out = [
        f'<svg class="chart gantt" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
        f'height="{height}" role="img" aria-label="runs over time">'
    ]
    for i, span in enumerate(spans):
        y = i * ROW + 2
        label = f'<text x="{LABEL - 8}" y="{y + 16}" class="label" text-anchor="end">{esc(_cut(span.label, 30))}</text>'
        if span.link:
            label = f'<a href="{esc(span.link)}">{label}</a>'
        out.append(f"<g><title>{esc(span.label)}: {esc(span.status)}</title>{label}")
        if span.start is not None:
            x = LABEL + room * (span.start - t0) / total
            end = now if span.end is None else span.end
            w = max(2.0, room * (end - span.start) / total)
            out.append(
                f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{ROW - 8}" '
                f'class="bar st-{esc(span.status)}"/>'
            )
        else:
            out.append(f'<text x="{LABEL}" y="{y + 16}" class="value">not started</text>')
        out.append("</g>")
    y = len(spans) * ROW + 18
    started = datetime.fromtimestamp(t0).strftime("%H:%M:%S")
    out.append(
        f'<text x="{LABEL}" y="{y}" class="value">{started}</text>'
        f'<text x="{WIDTH - 20}" y="{y}" class="value" text-anchor="end">+{total:.1f} s</text>'
    )
    out.append("</svg>")
    return "".join(out)
