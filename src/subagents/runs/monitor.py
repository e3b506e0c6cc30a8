"""Following a run from the parent's side: its events as they land, its result when it
exists, and a supervisor that died without writing one.

Waiting uses inotify where there is one (a wake-up per write, no polling); elsewhere
a short sleep. Either way the supervisor's liveness is checked every second, so
nothing waits forever.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import events as ev
from subagents.core import paths
from subagents.core.files import loads, read_events
from subagents.core.records import is_event, is_run_result
from subagents.core.tail import LineTail
from subagents.core.upgrade import read_result
from subagents.core.waker import DirWaker
from subagents.launchers import Launched, reattach, unrecorded
from subagents.supervisor.result import publish_ended, spec_of

if TYPE_CHECKING:
    from subagents.types import Event, RunResult, RunStatus

# What a follower is handed: each event of the run, as it lands.
OnEvent = Callable[["Event"], None]

LIVENESS_EVERY = 1.0
# A supervisor that has not yet recorded itself gets this long before it counts as lost.
START_PATIENCE = 10.0


class RunMonitor:
    """Follows one run. ``launched``: its supervisor as the launch handed it back; without
    it (a run started by another process), as the run's ``supervisor.json`` says each time
    it is asked (a restarted driver may have taken the run over since)."""

    def __init__(self, run_dir: Path, launched: Launched | None = None) -> None:
        self.run_dir = run_dir
        self.launched = launched
        # Read a bounded chunk at a time: a follower that lags far behind holds one chunk
        # (plus the longest line) at a time, not the whole backlog.
        self.tail = LineTail(run_dir / "events.jsonl")
        self._created: float | None = None  # the run record's own time, read once
        # Set by whoever stops the run: a supervisor that then dies without a result
        # (say, killed while it was still starting) leaves an aborted run, not a failed one.
        self.stop_requested = False

    # ---- events ----------------------------------------------------------

    def new_events(self) -> list[Event]:
        """Events appended since the last call (complete lines, about a chunk of them)."""
        return [event for line in self.tail.read() if (event := _parse(line)) is not None]

    def _deliver(self, on_event: OnEvent) -> None:
        """Hand every event written so far to ``on_event``, a chunk at a time."""
        for line in self.tail.lines():
            event = _parse(line)
            if event is not None:
                on_event(event)

    # ---- result and liveness --------------------------------------------

    def result(self) -> RunResult | None:
        """The run's ``result.json``; None while there is none (one that is not a run's
        result counts as none yet: it is written whole, once)."""
        try:
            data = read_result(self.run_dir)
        except (FileNotFoundError, ValueError):
            return None
        return data if is_run_result(data) else None

    def supervisor(self) -> Launched | None:
        """The run's supervisor; None while none is recorded."""
        if self.launched is not None:
            return self.launched
        return reattach(self.run_dir, follow=False)

    def supervisor_alive(self) -> bool:
        supervisor = self.supervisor()
        if supervisor is None:
            # Not recorded yet: give a starting supervisor a moment, counted from when the
            # run was made (never from when someone looked, or every look grants another).
            return time.time() - self.created_at() < START_PATIENCE
        return supervisor.alive()

    def created_at(self) -> float:
        """When the run was made: its record's ``createdAt``, else its directory's time."""
        if self._created is None:
            created = spec_of(self.run_dir).createdAt
            if not created:
                try:
                    created = self.run_dir.stat().st_mtime
                except OSError:
                    created = 0.0  # no run at all: nothing to wait for
            self._created = created
        return self._created

    def wait(
        self, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> RunResult | None:
        """Follow the run until ``result.json`` exists; None if ``timeout`` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        # Without a listener only the result's arrival matters, not each write to the log.
        waker = DirWaker(self.run_dir, writes=on_event is not None)
        waker.arm()  # before the first look, so no write in between is missed
        try:
            next_check = time.monotonic() + LIVENESS_EVERY
            while True:
                # Without a listener the events are not read at all.
                if on_event is not None:
                    self._deliver(on_event)
                result = self.result()
                if result is not None:
                    if on_event is not None:
                        self._deliver(on_event)
                    return result
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + LIVENESS_EVERY
                    if not self.supervisor_alive():
                        return self.recover_dead_supervisor()
                if deadline is not None and now >= deadline:
                    return None
                until = next_check if deadline is None else min(next_check, deadline)
                waker.wait(until - now)
        finally:
            waker.close()

    def _job_cancel_requested(self, job_id: str | None) -> bool:
        """Whether the run's job was asked to stop (by any process): see paths.CANCEL_FILE."""
        home = self.run_dir.parent.parent
        return bool(job_id) and paths.cancel_file(home, str(job_id)).exists()

    def recover_dead_supervisor(self) -> RunResult:
        """The supervisor is gone without a result: clean up after it and write one."""
        result = self.result()
        if result is not None:  # it finished just now
            return result
        events = read_events(self.run_dir / "events.jsonl")
        supervisor = self.supervisor() or unrecorded()
        spec = spec_of(self.run_dir)
        status: RunStatus
        if self.stop_requested or self._job_cancel_requested(spec.jobId):
            status, message = (
                "aborted",
                "aborted: the run was stopped; its supervisor ended without a result",
            )
        else:
            status, message = "failed", "the supervisor died without writing a result"
        lost = supervisor.lost()
        if lost:
            message += f": {lost}"
        # What is left of the run where it ran: its child's group here, its actor on a node.
        done = supervisor.orphaned(ev.started_event(events), spec.runId)
        if done:
            message += f"; {done}"
        return publish_ended(
            self.run_dir,
            spec=spec,
            status=status,
            error_message=message,
            tool_calls=sum(1 for e in events if e.get("type") == "tool_call"),
            executor=supervisor.where(),
            events=events,
        )


def _parse(line: bytes) -> Event | None:
    """An event line, or None for one that is not a canonical event (a torn line is never
    read: see LineTail)."""
    try:
        event = loads(line)
    except ValueError:
        return None
    return event if is_event(event) else None
