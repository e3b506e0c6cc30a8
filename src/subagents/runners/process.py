"""The process runner: the supervisor as a detached process (its own session), so the
run goes on when its caller exits. A warm spare (runners/spare.py) is handed the run when
one is ready; otherwise a supervisor is started for it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psutil

from subagents.core.files import open_private
from subagents.runners.base import Launched, RunnerError, record, supervisor_argv
from subagents.runners.spare import SPARES


def launch(run_dir: Path) -> Launched:
    spare = SPARES.take()
    if spare is not None:
        if spare.hand(run_dir):
            # It opens its own supervisor.log once it has the run directory.
            return record(run_dir, Launched(spare.pid, spare.create_time, "process", spare.popen))
        SPARES.drop(spare)
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
