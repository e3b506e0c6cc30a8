"""The tmux launcher: each run's supervisor in a window of the ``subagents`` tmux session,
showing its live progress. Same supervisor, same artifacts, same semantics as the
process launcher; only the launch differs.

No shell is involved: tmux gets the supervisor's argv as separate arguments and
executes it directly. The caller's environment reaches the supervisor through a
private file in the run directory (read and removed at start), not through tmux's
command line, where other users could read it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core.files import write_json_atomic
from subagents.errors import LaunchError
from subagents.launchers.base import supervisor_argv, write_record
from subagents.launchers.local import LocalLauncher, LocalSupervisor
from subagents.supervisor.handover import ENVIRON_FILE

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.supervisor.spec import RunSpec

SESSION = "subagents"
TIMEOUT = 10.0


def _tmux(tmux: str, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [tmux, *args], capture_output=True, text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"tmux did not answer: {exc}") from exc


class TmuxLauncher(LocalLauncher):
    name = "tmux"
    echo = True

    def __init__(self, session: str = SESSION) -> None:
        self.session = session

    def launch(
        self, run_dir: Path, spec: RunSpec, *, stopped: Callable[[], bool] | None = None
    ) -> LocalSupervisor:
        import psutil  # here: the launcher is chosen (and checked) where a job is planned

        session = self.session
        tmux = shutil.which("tmux")
        if tmux is None:
            raise LaunchError(
                "tmux not found on PATH: install it (e.g. apt-get install tmux) or use --launcher process"
            )
        write_json_atomic(run_dir / ENVIRON_FILE, dict(os.environ))
        if _tmux(tmux, "has-session", "-t", f"={session}").returncode != 0:
            # Starts the tmux server too when none runs. The first window is a plain
            # shell the user may close; runs get windows of their own.
            started = _tmux(tmux, "new-session", "-d", "-s", session, "-n", "subagents")
            if started.returncode != 0 and "duplicate session" not in started.stderr:
                raise LaunchError(
                    f"tmux could not start session {session!r}: {started.stderr.strip()}"
                )
        name = run_dir.name[-8:]
        made = _tmux(
            tmux,
            "new-window",
            "-d",
            "-P",
            "-F",
            "#{pane_pid}",
            "-t",
            f"={session}:",
            "-n",
            name,
            *supervisor_argv(run_dir),
        )
        if made.returncode != 0:
            raise LaunchError(f"tmux could not open a window: {made.stderr.strip()}")
        try:
            pid = int(made.stdout.strip().splitlines()[-1])
            create_time = psutil.Process(pid).create_time()
        except (ValueError, IndexError) as exc:
            raise LaunchError(f"tmux did not report the window's process: {made.stdout!r}") from exc
        except psutil.Error:
            create_time = 0.0  # already done: the monitor will find its result or see it gone
        launched = LocalSupervisor(self.name, pid, create_time)
        write_record(run_dir, launched)
        return launched
