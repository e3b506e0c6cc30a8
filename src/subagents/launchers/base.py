"""What every runner hands back: who the supervisor is, so a monitor can tell if it died."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subagents.core import procs
from subagents.core.files import write_json_atomic
from subagents.supervisor import handover

SUPERVISOR_FILE = "supervisor.json"


@dataclass
class Launched:
    pid: int
    create_time: float
    runner: str
    # Present when this process started the supervisor itself: polling it reaps it.
    popen: subprocess.Popen[bytes] | None = None

    # False for an executor whose supervisor runs on another machine: its child's pid means
    # nothing here, so a monitor must never kill that pid's group locally.
    remote = False

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return procs.is_alive({"pid": self.pid, "createTime": self.create_time})

    def terminate(self, sig: int) -> None:
        """Signal the supervisor: SIGTERM asks it to abort the run, SIGKILL ends it."""
        procs.killpg(self.pid, sig)

    def lost(self) -> str | None:
        """Why the supervisor is gone without a result, when the executor knows."""
        return None

    def where(self) -> dict[str, Any] | None:
        """Where the run executes, for ``result.json`` (None: here, the local executor)."""
        return None


def supervisor_argv(run_dir: Path) -> list[str]:
    return handover.command(run_dir)


def record(run_dir: Path, launched: Launched, **extra: Any) -> Launched:
    write_json_atomic(
        run_dir / SUPERVISOR_FILE,
        {
            "pid": launched.pid,
            "createTime": launched.create_time,
            "runner": launched.runner,
            **extra,
        },
    )
    return launched
