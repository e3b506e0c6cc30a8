"""A supervisor on this machine (the process and tmux launchers): who it is, so a monitor
can tell whether it died, and how to signal it."""

from __future__ import annotations

import contextlib
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core import procs
from subagents.core.records import process_identity

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.supervisor.spec import RunSpec
    from subagents.types import ExecutorPlace, JsonObject, LocalSupervisorRecord, RunStarted


@dataclass
class LocalSupervisor:
    """A supervisor process here: its pid and start time (a reused pid is never mistaken for
    it), and its ``Popen`` when this process started it (polling it reaps it)."""

    launcher: str
    pid: int
    create_time: float
    popen: subprocess.Popen[bytes] | None = None

    @classmethod
    def from_record(cls, record: JsonObject) -> LocalSupervisor:
        """The supervisor its ``supervisor.json`` names (ValueError for one that names none)."""
        launcher, ident = record.get("runner"), process_identity(record)
        if not isinstance(launcher, str) or ident is None:
            raise ValueError("supervisor.json names no supervisor process")
        return cls(launcher, ident["pid"], ident["createTime"])

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return self.pid > 0 and procs.is_alive({"pid": self.pid, "createTime": self.create_time})

    def terminate(self, sig: int) -> None:
        # Only while it is the process that was started: the pid may be someone else's now.
        if self.alive():
            procs.killpg(self.pid, sig)

    def lost(self) -> str | None:
        return None

    def where(self) -> ExecutorPlace | None:
        return None

    def orphaned(self, child: RunStarted | None, run_id: str) -> str | None:
        return None if child is None else procs.end_recorded_group(child, run_id)

    def reap(self, timeout: float) -> None:
        # In the background: the caller (a job's slot) goes on to its next run meanwhile.
        if self.popen is not None and self.popen.poll() is None:
            threading.Thread(target=_reap, args=(self.popen, timeout), daemon=True).start()

    def record(self) -> LocalSupervisorRecord:
        return {"pid": self.pid, "createTime": self.create_time, "runner": self.launcher}


def _reap(popen: subprocess.Popen[bytes], timeout: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout)


def unrecorded() -> LocalSupervisor:
    """A run whose supervisor was never recorded (or whose record is unreadable): gone."""
    return LocalSupervisor("unknown", 0, 0.0)


class LocalLauncher:
    """What the process and tmux launchers share: a supervisor here, nothing to check."""

    name = "process"
    keeps_spares = False
    echo = False

    def check(self) -> None:
        return None

    def launch(
        self, run_dir: Path, spec: RunSpec, *, stopped: Callable[[], bool] | None = None
    ) -> LocalSupervisor:
        raise NotImplementedError

    def reattach(
        self, run_dir: Path, record: JsonObject, *, follow: bool = True
    ) -> LocalSupervisor:
        # The supervisor goes on without its starter: following it is watching its pid.
        return LocalSupervisor.from_record(record)
