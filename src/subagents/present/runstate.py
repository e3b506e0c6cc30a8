"""What is known about one run while it goes on, from its canonical events.

Shared by the terminal display and the JSON-lines progress feed, so both count tools and
word progress the same way (the wording is :class:`ProgressFormatter`'s, as in
``transcript.md``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from subagents.present.progress import ProgressFormatter


class RunState:
    def __init__(self, label: str, max_len: int | None = None) -> None:
        self.label = label
        self.fmt = ProgressFormatter(max_len=max_len)
        self.t0: float | None = None
        self.tools = 0
        # The latest usage event's fields but its type (running totals; seq and ts too).
        self.usage: dict[str, Any] = {}
        self.status: str | None = None

    def update(self, event: Mapping[str, Any]) -> str | None:
        """Take ``event`` (a canonical event, read as ProgressFormatter.line reads it) in;
        the progress line it makes, if any."""
        kind = event.get("type")
        if kind == "run_started":
            self.t0 = time.monotonic()
        elif kind == "tool_call":
            self.tools += 1
        elif kind == "usage":
            self.usage = {k: v for k, v in event.items() if k != "type"}
        elif kind == "run_finished":
            self.status = str(event.get("status"))
        return self.fmt.line(event)
