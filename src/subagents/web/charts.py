"""Charts drawn as SVG, so the page needs no chart library: bars (one per row, for a cost or
a token count), columns (one per day) and a Gantt of a job's runs. The geometry is worked
out here; ``templates/_charts.html`` draws it. Colours come from the stylesheet (classes),
never from inline style: the Content-Security-Policy allows none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from markupsafe import Markup

from subagents.web.templates import render

WIDTH = 720
ROW = 24
LABEL = 220
VALUE = 180


def _cut(text: str, limit: int) -> str:
    """A path's end (where it differs from its neighbours') in ``limit`` characters."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _head(text: str, limit: int) -> str:
    """A run's label from its start (its task's first words) in ``limit`` characters."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class Mark:
    """One bar, column or run: where it is drawn and what it says."""

    label: str
    shown: str
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0
    title: str = ""
    status: str = ""
    link: str = ""
    started: bool = True


@dataclass
class Chart:
    kind: str  # "bars" | "columns" | "gantt"
    title: str
    height: int
    marks: list[Mark] = field(default_factory=list)
    width: int = WIDTH
    base: float = 0.0  # columns: the baseline; gantt: the time axis's y
    values: bool = True  # columns: whether each says its value
    start: str = ""  # gantt: when the first run started
    span: str = ""  # gantt: how long all took


def _draw(chart: Chart) -> Markup:
    """The chart as SVG: markup of this module's own template, its every text escaped."""
    return Markup(render("_charts.html", chart=chart, label_x=LABEL, row=ROW))


def bars(items: Sequence[tuple[str, float, str]], *, title: str) -> Markup:
    """A horizontal bar per ``(label, value, shown value)``, longest for the largest value."""
    if not items:
        return Markup()
    top = max(value for _, value, _ in items) or 1.0
    room = WIDTH - LABEL - VALUE
    chart = Chart("bars", title, ROW * len(items) + 4)
    for i, (label, value, shown) in enumerate(items):
        width = max(1.0, room * value / top) if value > 0 else 0.0
        chart.marks.append(
            Mark(_cut(label, 30), shown, LABEL, i * ROW + 2, width, title=f"{label}: {shown}")
        )
    return _draw(chart)


def columns(items: Sequence[tuple[str, float, str]], *, title: str) -> Markup:
    """A column per ``(label, value, shown value)`` (days, oldest first), on one baseline."""
    if not items:
        return Markup()
    top = max(value for _, value, _ in items) or 1.0
    base, chart_top = 170, 20
    step = min(60.0, (WIDTH - 20) / len(items))
    chart = Chart("columns", title, 200, base=base, values=len(items) <= 12)
    for i, (label, value, shown) in enumerate(items):
        h = (base - chart_top) * value / top if value > 0 else 0.0
        day = label[5:] if len(label) == 10 else label
        chart.marks.append(
            Mark(day, shown.split(" ")[0], 10 + i * step, base - h, step, h, f"{label}: {shown}")
        )
    return _draw(chart)


@dataclass
class Span:
    """One run on a Gantt: from ``start`` to ``end`` (None: still running), epoch seconds."""

    label: str
    start: float | None
    end: float | None
    status: str
    link: str = ""


def gantt(spans: Sequence[Span], *, now: float | None = None) -> Markup:
    """A bar per run over the job's time: which ran side by side, which waited for which."""
    now = time.time() if now is None else now
    if not spans:
        return Markup()
    known = [s.start for s in spans if s.start is not None]
    ends = [now if s.end is None else s.end for s in spans if s.start is not None]
    t0 = min(known, default=now)
    total = max(max(ends or [now]) - t0, 0.001)
    room = WIDTH - LABEL - 20
    chart = Chart(
        "gantt",
        "runs over time",
        ROW * len(spans) + 26,
        base=len(spans) * ROW + 18,
        start=datetime.fromtimestamp(t0).strftime("%H:%M:%S"),
        span=f"+{total:.1f} s",
    )
    for i, span in enumerate(spans):
        mark = Mark(_head(span.label, 32), "", y=i * ROW + 2, status=span.status, link=span.link)
        mark.title = f"{span.label}: {span.status}"
        if span.start is None:
            mark.started = False
        else:
            end = now if span.end is None else span.end
            mark.x = LABEL + room * (span.start - t0) / total
            mark.w = max(2.0, room * (end - span.start) / total)
        chart.marks.append(mark)
    return _draw(chart)
