"""The stall watchdog's state: a child silent for the stall timeout with no tool call in
flight is stalled (a long build is not a stall); one tool call running past the tool timeout
is over. Standard library only (the supervisor imports it)."""

from __future__ import annotations


class StallWatch:
    def __init__(self, stall_timeout: float | None, tool_timeout: float | None, now: float) -> None:
        self.stall_timeout = stall_timeout
        self.tool_timeout = tool_timeout
        self.active_at = now  # when stdout last said anything
        self.noticed = False  # one stall notice until the child speaks again
        self.tools_open: dict[str, float] = {}  # call id -> when it started

    def heard(self, now: float) -> None:
        self.active_at = now
        self.noticed = False

    def tool_started(self, call_id: str, now: float) -> None:
        self.tools_open[call_id] = now

    def tool_ended(self, call_id: str) -> None:
        self.tools_open.pop(call_id, None)

    def due(self, now: float) -> str | None:
        """``"tool_timeout"``, ``"stalled"`` (once per silence), or None."""
        if self.tool_timeout and self.tools_open:
            if now - min(self.tools_open.values()) >= self.tool_timeout:
                return "tool_timeout"
            return None
        if not self.stall_timeout or self.noticed or self.tools_open:
            return None
        if now - self.active_at >= self.stall_timeout:
            self.noticed = True
            return "stalled"
        return None

    def next_point(self) -> float | None:
        """When the watchdog next has something to decide."""
        if self.tool_timeout and self.tools_open:
            return min(self.tools_open.values()) + self.tool_timeout
        if self.stall_timeout and not self.noticed and not self.tools_open:
            return self.active_at + self.stall_timeout
        return None
