"""Starting a run's supervisor through its launcher, finding again one started by another
process (a restarted job driver, ``subagents stop``), and keeping supervisors warm for a
job's next runs."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from subagents.config import Settings
from subagents.core import procs
from subagents.errors import LaunchError, SubagentsError, UsageError
from subagents.launchers import Placement, launcher_for, reattach, unrecorded, want_spares
from subagents.runs.handle import RunHandle
from subagents.runs.monitor import RunMonitor
from subagents.runs.request import RunRequest
from subagents.runs.rundir import prepare
from subagents.supervisor.spec import RunSpec

if TYPE_CHECKING:
    from subagents.types import RunStatus


def start_prepared(
    spec: RunSpec,
    run_dir: Path,
    placement: Placement,
    *,
    stopped: Callable[[], bool] | None = None,
) -> RunHandle:
    """Start a prepared run (``stopped``: whether its job was stopped meanwhile, which a
    launch that waits, such as connecting to a Ray cluster, gives up on: the run is
    ``aborted``)."""
    try:
        launched = launcher_for(placement).launch(run_dir, spec, stopped=stopped)
    except LaunchError as exc:
        # The run directory exists: it must not be left without a result.
        from subagents.supervisor.result import publish_ended

        status: RunStatus = "aborted" if stopped is not None and stopped() else "failed"
        publish_ended(
            run_dir, spec=spec, status=status, error_message=str(exc), started_at=time.time()
        )
        raise UsageError(str(exc)) from None
    return RunHandle(spec, run_dir, launched)


def start(
    req: RunRequest,
    settings: Settings | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    *,
    placement: Placement | None = None,
) -> RunHandle:
    """Check and start one run; ``placement``: where (else as the settings say)."""
    settings = settings or Settings()
    placement = placement or Placement.of(settings)
    spec, run_dir = prepare(req, settings, env, home, placement=placement)
    return start_prepared(spec, run_dir, placement)


def keep_warm(owner: object, count: int, placement: Placement) -> None:
    """Have ``count`` supervisors started ahead for ``owner``'s next runs (a job with runs
    still to start; 0 once it has none): a run then starts without waiting for an
    interpreter. Only where the launcher keeps spares (process)."""
    want_spares(owner, count, placement)


def resume(run_dir: Path) -> RunHandle:
    """Follow again a run whose starter is gone (a restarted job driver): its supervisor
    goes on without it, here or on a Ray node (found again as its record says)."""
    from subagents.supervisor.result import spec_of

    follow = not (run_dir / "result.json").exists()
    launched = None
    with contextlib.suppress(LaunchError):
        launched = reattach(run_dir, follow=follow)
    if launched is None and follow:
        # Cannot be followed from here (its cluster is unreachable): looked at only, the
        # monitor finds it gone and ends it where it ran.
        launched = reattach(run_dir, follow=False)
    return RunHandle(spec_of(run_dir), run_dir, launched or unrecorded())


def stop_run(run_dir: Path, grace: float) -> None:
    """Abort a run started by another process (``subagents stop``) and see it end: its
    supervisor is signalled wherever it runs, and one that does not answer within
    ``grace`` seconds is taken for dead (its result written here)."""
    monitor = RunMonitor(run_dir)
    if monitor.result() is not None:
        return
    monitor.stop_requested = True
    launched = reattach(run_dir, follow=False)
    if launched is None:
        if monitor.wait(timeout=grace) is None:
            monitor.recover_dead_supervisor()
        return
    monitor.launched = launched

    def send(sig: int) -> None:
        with contextlib.suppress(OSError, SubagentsError):
            launched.terminate(sig)

    # SIGTERM, the grace for its result, then SIGKILL and the run ended here: a supervisor
    # that does not answer is not waited on.
    if not procs.escalate(send, lambda t: monitor.wait(timeout=t) is not None, grace):
        monitor.recover_dead_supervisor()
