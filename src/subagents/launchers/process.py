"""The process runner: the supervisor as a detached process (its own session), so the
run goes on when its caller exits. It is handed its run directory on a pipe: a warm
spare when the job keeps one ready, else one started for this run (runners/spare.py)."""

from __future__ import annotations

from pathlib import Path

from subagents.core.files import open_private
from subagents.errors import LaunchError
from subagents.launchers.base import Launched, record
from subagents.launchers.spares import SPARES, gated_start
from subagents.supervisor.handover import LOG_FILE


def launch(run_dir: Path) -> Launched:
    spare = SPARES.take()
    if spare is not None and not spare.hand(run_dir):
        SPARES.drop(spare)
        spare = None
    if spare is None:
        try:
            # Its start-up errors (before it has its run) land in the run's log.
            with open_private(run_dir / LOG_FILE, "ab") as log:
                spare = gated_start(stderr=log)
        except OSError as exc:
            raise LaunchError(f"could not start the supervisor: {exc}") from exc
        if not spare.hand(run_dir):
            SPARES.drop(spare)  # dismissed, and reaped once gone
            raise LaunchError("could not start the supervisor: it exited at once")
    return record(run_dir, Launched(spare.pid, spare.create_time, "process", spare.popen))
