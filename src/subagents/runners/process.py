"""The process runner: the supervisor as a detached process (its own session), so the
run goes on when its caller exits."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil

from subagents.core.files import open_private
from subagents.runners.base import Launched, RunnerError, record, supervisor_argv


def launch(run_dir: Path) -> Launched:
    try:
        with open_private(run_dir / "supervisor.log", "ab") as log:
            popen = subprocess.Popen(
                supervisor_argv(run_dir),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
    except OSError as exc:
        raise RunnerError(f"could not start the supervisor: {exc}") from exc
    try:
        create_time = psutil.Process(popen.pid).create_time()
    except psutil.Error:
        create_time = 0.0  # already gone and reaped: the monitor will see it dead
    return record(run_dir, Launched(popen.pid, create_time, "process", popen))
