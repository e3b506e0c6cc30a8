"""What is known about one run while it goes on, from its canonical events.

Shared by the terminal display and the JSON-lines progress feed, so both count tools and
word progress the same way (the wording is :class:`ProgressFormatter`'s, as in
``transcript.md``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from subagents.core.childtext import neutralize
from subagents.core.events import STOPPING, empty_usage, number, usage_of
from subagents.present.figures import elapsed
from subagents.present.humanize import WARN_LEVELS, collapse, head
from subagents.present.outcome import mark
from subagents.present.progress import LINE_LIMIT, ProgressFormatter

if TYPE_CHECKING:
    from subagents.types import Event, Usage


class RunState:
    def __init__(self, label: str, max_len: int | None = None) -> None:
        self.label = label
        self.fmt = ProgressFormatter(max_len=max_len)
        self.t0: float | None = None
        self.tools = 0
        # The latest usage event's running totals.
        self.usage: Usage = empty_usage()
        self.status: str | None = None
        self.duration_ms: float | None = None
        # From run_started (the model as asked for, provider included) and the stream.
        self.backend: str | None = None
        self.model: str | None = None
        self.started_at: float | None = None  # the event's epoch seconds: the engine's clock
        self.warning: str | None = None  # the child's latest warning (a retry, a notice)

    def update(self, event: Event) -> str | None:
        """Take ``event`` in (its fields read as ProgressFormatter.line reads them); the
        progress line it makes, if any."""
        if event["type"] == "run_started":
            self.t0 = time.monotonic()
            self.started_at = number(event.get("ts"))
            self.backend = _text(event.get("backend"))
            self.model = _text(event.get("model"))
        elif event["type"] == "tool_call":
            self.tools += 1
        elif event["type"] == "usage":
            self.usage = usage_of(event)
        elif event["type"] == "run_finished":
            self.status = str(event.get("status"))
            self.duration_ms = number(event.get("durationMs"))
        elif event["type"] == "assistant_text" and self.model is None:
            self.model = _text(event.get("model"))  # the CLI's default model, as it says
        elif event["type"] == "notice" and str(event.get("level") or "").lower() in WARN_LEVELS:
            message = str(event.get("message") or "")
            if not message.endswith(STOPPING):  # the supervisor's own stop: its end says it
                self.warn(message)
        return self.fmt.line(event)

    def warn(self, message: str) -> None:
        text = collapse(neutralize(message))
        if text:
            self.warning = head(text, LINE_LIMIT)

    @property
    def stalled(self) -> bool:
        return self.fmt.stalled_for() is not None

    def brief(self, room: int | None = None) -> str:
        """``✓ 3.1s`` once ended, else what it does now (at most ``room`` characters)."""
        if self.status is not None:
            seconds = None if self.duration_ms is None else self.duration_ms / 1000
            return f"{mark(self.status)} {elapsed(seconds)}"
        what = self.fmt.activity() or "starting"
        return what if room is None else head(what, room)


def runs_line(runs: list[RunState], limit: int) -> str:
    """Every run of a job in one line of at most ``limit`` characters, in order:
    ``[1] ✓ 3.1s · [2] $ sleep 3; ls · [3-5] waiting``; what running runs do is cut evenly
    to fit."""
    # (index, run) for a run that started; (first, last) for a stretch of runs not started.
    pieces: list[tuple[int, RunState] | tuple[int, int]] = []
    for i, r in enumerate(runs):
        if r.t0 is not None or r.status is not None:
            pieces.append((i, r))
        elif pieces and isinstance(pieces[-1][1], int) and pieces[-1][1] == i - 1:
            pieces[-1] = (pieces[-1][0], i)
        else:
            pieces.append((i, i))

    def line(room: int | None) -> str:
        parts = []
        for first, what in pieces:
            if isinstance(what, RunState):
                parts.append(f"[{first + 1}] {what.brief(room)}")
            else:
                span = f"{first + 1}" if what == first else f"{first + 1}-{what + 1}"
                parts.append(f"[{span}] waiting")
        return " · ".join(parts)

    text = line(None)
    busy = [r for r in runs if r.t0 is not None and r.status is None]
    if len(text) <= limit or not busy:
        return head(text, limit)
    over = len(text) - limit
    room = max(8, max(len(r.brief()) for r in busy) - -(-over // len(busy)))
    while room > 8 and len(line(room)) > limit:
        room -= 1
    return head(line(room), limit)


def _text(value: object) -> str | None:
    return str(value) if value else None
