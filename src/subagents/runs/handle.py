"""A started run, from its caller's side: follow its events, wait for its result, stop it."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import procs
from subagents.launchers import Launched
from subagents.runs.monitor import OnEvent, RunMonitor
from subagents.supervisor.spec import RunSpec

if TYPE_CHECKING:
    from subagents.types import RunResult


class RunHandle:
    """A started run: follow its events, wait for its result, or stop it. ``launched`` is
    its supervisor as its launcher knows it (a local process, a run on a Ray node)."""

    def __init__(self, spec: RunSpec, run_dir: Path, launched: Launched) -> None:
        self.spec = spec
        self.run_id = spec.runId
        self.run_dir = run_dir
        self.launched = launched
        self.monitor = RunMonitor(run_dir, launched)

    def wait(
        self, on_event: OnEvent | None = None, timeout: float | None = None
    ) -> RunResult | None:
        result = self.monitor.wait(on_event=on_event, timeout=timeout)
        if result is not None:
            self.reap()
        return result

    def reap(self, timeout: float = 5.0) -> None:
        """Collect the supervisor's exit status once its result is out (it exits right after
        publishing it), so a long-lived caller (the MCP server) keeps no zombie per run."""
        self.launched.reap(timeout)

    def result(self) -> RunResult | None:
        return self.monitor.result()

    def stop(self, on_event: OnEvent | None = None, sig: int = signal.SIGTERM) -> RunResult:
        """Abort the run: the supervisor kills the child's group and writes ``aborted``.
        ``sig`` is what the supervisor gets: the signal the caller itself was sent (Ctrl-C is
        SIGINT), so the result names the signal that was sent.

        Bounded: if the supervisor does not answer, it is killed and the result is
        written here.
        """
        self.monitor.stop_requested = True
        if self.result() is None and self.launched.alive():
            answered = procs.escalate(
                self.launched.terminate,
                lambda grace: self.wait(on_event=on_event, timeout=grace) is not None,
                self.spec.killGrace + 5.0,
                sig,
            )
            if answered and (done := self.result()) is not None:
                return done  # followed to its end by that wait: events delivered, reaped
        done = self.wait(on_event=on_event, timeout=5.0)
        return done if done is not None else self.monitor.recover_dead_supervisor()
