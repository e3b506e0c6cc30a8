"""A run's state over time, as the supervisor keeps it: its phase, what it waits for next
(``Deadlines``) and the stall watchdog's state (``StallWatch``).

The phases, in order::

    starting -> running -> at_rest -> grace -> stopping -> draining -> finished
                   ^          |          |                   |
                   +----------+----------+-------------------+  (a turn goes on; a
                                                                 continuation's new child)

``at_rest``: the child's last event ended its turn, and live control decides whether the run
goes on (``running`` again) or ends (``grace``: completion armed, the child has that long to
exit). ``stopping``: the child's group was sent SIGTERM (SIGKILL follows after the kill
grace). ``draining``: the child is gone and what is left of its stdout is read. Every move is
checked against ``NEXT``: another one is a bug and raises ``PhaseError``.

Why a run stops (``StopCause``) is kept beside the phase: the first cause wins, and none
is taken after an answer (the run completes), but a budget's. Standard library only (the
supervisor imports it).
"""

from __future__ import annotations

from subagents.errors import PhaseError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Literal, TypeAlias

    PhaseName: TypeAlias = Literal[
        "starting", "running", "at_rest", "grace", "stopping", "draining", "finished"
    ]
    # What stopped a run before its answer (the supervisor's doing; ``decide`` names it).
    StopCause: TypeAlias = Literal["timeout", "aborted", "stalled", "tool_timeout", "limit"]
    # A budget's course (supervisor/budget.py): "wrapping" once the wrap-up is sent,
    # "aborting" at the abort, "stopped" when the run stopped at an answer over it.
    BudgetState: TypeAlias = Literal["ok", "wrapping", "aborting", "stopped"]
    # What the stall watchdog finds due.
    WatchDue: TypeAlias = Literal["stalled", "tool_timeout"]
    # What live control (live.py, control.py) asks of the supervisor: "limit", a budget stops
    # the run (a live child is asked to end its turn, ``Normalizer.abort``; any other is
    # stopped).
    Action: TypeAlias = Literal["limit"]

# Each phase and the phases it may go to.
NEXT: dict[PhaseName, tuple[PhaseName, ...]] = {
    # spawned; or never (stopped before the spawn, or the spawn failed)
    "starting": ("running", "finished"),
    "running": ("at_rest", "stopping", "draining"),
    # live control decides at once: the run goes on, or completion is armed
    "at_rest": ("running", "grace"),
    # the child exits (the common end), is stopped at the deadline, or speaks again
    "grace": ("draining", "stopping", "running"),
    "stopping": ("draining",),
    # a continuation's new child, or the end
    "draining": ("running", "finished"),
    "finished": (),
}
# Where the child is alive and has not been signalled.
ALIVE: tuple[PhaseName, ...] = ("running", "at_rest", "grace")


class Phase:
    """The run's phase, why it stops (``cause``) and whether the child's last event ended its
    turn (``terminal``: what the normalizer's last ``Fed`` said, or the supervisor decided)."""

    __slots__ = ("cause", "name", "terminal")

    def __init__(self) -> None:
        self.name: PhaseName = "starting"
        self.cause: StopCause | None = None
        self.terminal = False

    def to(self, name: PhaseName) -> None:
        if name not in NEXT[self.name]:
            raise PhaseError(f"the run cannot go from {self.name} to {name}")
        self.name = name

    def stop_for(self, cause: StopCause) -> None:
        """The run stops for ``cause``: the first cause is the one; after an answer there is
        none (the answer completes the run), but a budget's (it names the limit reached)."""
        if self.cause is None and (cause == "limit" or not self.terminal):
            self.cause = cause

    @property
    def stopped(self) -> bool:
        """Whether the run stops for a cause of the supervisor's (or a signal: ``aborted``)."""
        return self.cause is not None

    def rest(self) -> None:
        """The child's last event ended its turn (a run stopping or draining stays so)."""
        self.terminal = True
        if self.name == "running":
            self.to("at_rest")

    def go_on(self) -> None:
        """A turn starts again (a follow-up sent, input the CLI holds, more activity)."""
        self.terminal = False
        if self.name in ("at_rest", "grace"):
            self.to("running")

    def signalled(self) -> None:
        """The child's group was sent SIGTERM (a group signalled after the child exited
        stays draining: a grandchild may still hold its stdout)."""
        if self.name != "draining":
            self.to("stopping")

    def exited(self) -> None:
        """The child is gone: what is left of its stdout is read."""
        if self.name != "draining":
            self.to("draining")


# After the child exits, how long to keep reading a stdout that a grandchild holds open.
DRAIN_AFTER_EXIT = 0.2
# The longest the event loop waits at once (epoll takes at most 2^31 ms, ~24.8 days): a
# deadline further off is waited for a day at a time, whatever meta.json says.
MAX_WAIT = 86400.0


class Deadlines:
    """Every point in time the supervisor acts at, as ``time.monotonic()`` (None: not set):

    ``grace``    completion armed: the child exits by then or is stopped
    ``kill``     SIGTERM sent: SIGKILL at this point
    ``timeout``  the run's timeout
    ``drain``    the child is gone: stop reading its stdout then
    ``abort``    a live child asked to end its turn (a budget): stopped if it has not by then
    ``handshake`` a live child that must answer a handshake first (ACP's ``initialize``):
                 the run fails and the child is stopped if it has not answered by then
    and the stall watchdog's (``watch``), which waits only while nothing is being stopped,
    and not while the child waits on a person (an approval: ``StallWatch.pause``).
    """

    __slots__ = ("abort", "drain", "grace", "handshake", "kill", "timeout", "watch")

    def __init__(
        self,
        now: float,
        timeout: float | None,
        stall_timeout: float | None,
        tool_timeout: float | None,
    ) -> None:
        self.grace: float | None = None
        self.kill: float | None = None
        self.timeout = now + timeout if timeout else None
        self.drain: float | None = None
        self.abort: float | None = None
        self.handshake: float | None = None
        self.watch = StallWatch(stall_timeout, tool_timeout, now)

    def new_child(self) -> None:
        """A continuation's child starts: the last one's grace, kill, drain and handshake
        are over."""
        self.grace = self.kill = self.drain = self.handshake = None

    @staticmethod
    def passed(point: float | None, now: float) -> bool:
        return point is not None and now >= point

    def next_wakeup(self, now: float, *others: float | None) -> float | None:
        """How long the event loop may wait (seconds), with ``others`` (the control
        endpoint's deadlines, a poll for the child's exit); None: until something happens."""
        watch = self.watch.next_point() if self.kill is None else None
        soonest: float | None = None
        points = (self.grace, self.kill, self.timeout, self.drain, self.abort, self.handshake)
        for point in (*points, watch, *others):
            if point is not None and (soonest is None or point < soonest):
                soonest = point
        if soonest is None:
            return None
        return min(MAX_WAIT, max(0.0, soonest - now))


class StallWatch:
    """A child silent for the stall timeout with no tool call in flight is stalled (a long
    build is not a stall); one tool call running past the tool timeout is over."""

    __slots__ = (
        "active_at",
        "noticed",
        "paused_at",
        "stall_timeout",
        "tool_timeout",
        "tools_open",
    )

    def __init__(self, stall_timeout: float | None, tool_timeout: float | None, now: float) -> None:
        self.stall_timeout = stall_timeout
        self.tool_timeout = tool_timeout
        self.active_at = now  # when stdout last said anything
        self.noticed = False  # one stall notice until the child speaks again
        self.tools_open: dict[str, float] = {}  # call id -> when it started
        # Since when the child waits on a person (an approval): no time counts meanwhile.
        self.paused_at: float | None = None

    def pause(self, now: float) -> None:
        """The child waits for a decision: neither silence nor a tool's time counts."""
        if self.paused_at is None:
            self.paused_at = now

    def resume(self, now: float) -> None:
        """The decision came: the wait is taken off every clock the watchdog keeps."""
        if self.paused_at is None:
            return
        waited = max(0.0, now - self.paused_at)
        self.paused_at = None
        self.active_at += waited
        for call_id in self.tools_open:
            self.tools_open[call_id] += waited

    def heard(self, now: float) -> None:
        self.active_at = now
        self.noticed = False

    def tool_started(self, call_id: str, now: float) -> None:
        self.tools_open[call_id] = now

    def tool_ended(self, call_id: str) -> None:
        self.tools_open.pop(call_id, None)

    def due(self, now: float) -> WatchDue | None:
        """``"tool_timeout"``, ``"stalled"`` (once per silence), or None."""
        if self.paused_at is not None:
            return None
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
        if self.paused_at is not None:
            return None
        if self.tool_timeout and self.tools_open:
            return min(self.tools_open.values()) + self.tool_timeout
        if self.stall_timeout and not self.noticed and not self.tools_open:
            return self.active_at + self.stall_timeout
        return None
