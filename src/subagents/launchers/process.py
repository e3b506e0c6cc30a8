"""The process launcher: the supervisor as a detached process (its own session), so the
run goes on when its caller exits. It is handed its run directory on a pipe: a warm
spare when the job keeps one ready, else forked by the job's template (several runs to
start: launchers/template.py), else one started for this run (launchers/spares.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from subagents.core.files import open_private
from subagents.errors import LaunchError
from subagents.launchers.base import write_record
from subagents.launchers.local import LocalLauncher, LocalSupervisor
from subagents.supervisor.handover import LOG_FILE

if TYPE_CHECKING:
    from collections.abc import Callable

    from subagents.supervisor.spec import RunSpec


class ProcessLauncher(LocalLauncher):
    name = "process"
    keeps_spares = True

    def launch(
        self, run_dir: Path, spec: RunSpec, *, stopped: Callable[[], bool] | None = None
    ) -> LocalSupervisor:
        # Here, not at the top: a job is planned (and checked) by processes that never
        # launch, such as `subagents run --bg`, and the spares' module brings psutil.
        from subagents.launchers.spares import SPARES, gated_start

        spare = SPARES.take()
        if spare is not None and not spare.hand(run_dir):
            SPARES.drop(spare)
            spare = None
        if spare is None and (forked := SPARES.fork(run_dir)) is not None:
            launched = LocalSupervisor(self.name, *forked)
            write_record(run_dir, launched)
            return launched
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
        launched = LocalSupervisor(self.name, spare.pid, spare.create_time, spare.popen)
        write_record(run_dir, launched)
        return launched
