"""What every runner hands back: who the supervisor is, so a monitor can tell if it died."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from subagents.core import procs
from subagents.core.files import write_json_atomic

SUPERVISOR_FILE = "supervisor.json"
# The caller's environment, for runners whose supervisor does not inherit it (tmux).
ENVIRON_FILE = "environ.json"


class RunnerError(Exception):
    """The runner could not start a supervisor."""


@dataclass
class Launched:
    pid: int
    create_time: float
    runner: str
    # Present when this process started the supervisor itself: polling it reaps it.
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return procs.is_alive({"pid": self.pid, "createTime": self.create_time})


def supervisor_argv(run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "subagents.runs.supervisor", str(run_dir)]


def record(run_dir: Path, launched: Launched) -> Launched:
    write_json_atomic(
        run_dir / SUPERVISOR_FILE,
        {"pid": launched.pid, "createTime": launched.create_time, "runner": launched.runner},
    )
    return launched
